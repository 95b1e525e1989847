"""`kernelsweep eval REFERENCE.py CANDIDATE.py`: evaluate one candidate and
print its eval record (docs/results.md). Exit 0 whenever the evaluation
completed, whatever the verdict; 2 when the harness could not run."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelsweep import metrics
from kernelsweep.evaluator import settings
from kernelsweep.evaluator.cli_common import emit, fail, non_negative_int, positive_float, positive_int
from kernelsweep.evaluator.errors import HarnessError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reference", type=Path, metavar="REFERENCE.py", help="KernelBench module: Model, get_inputs, get_init_inputs")
    parser.add_argument("candidate", type=Path, metavar="CANDIDATE.py", help="module defining ModelNew")
    parser.add_argument("--device", choices=settings.DEVICES, default="cuda")
    parser.add_argument("--precision", choices=settings.PRECISIONS, default="fp32")
    parser.add_argument("--trials", type=positive_int, default=5, help="correctness trials (default 5)")
    parser.add_argument("--timing-trials", type=positive_int, default=100, help="timed calls per side (default 100)")
    parser.add_argument("--warmup", type=non_negative_int, default=5, help="discarded timing rounds (default 5)")
    parser.add_argument("--timeout", type=positive_float, default=240.0, help="run limit per worker, seconds (default 240)")
    parser.add_argument("--compile-timeout", type=positive_float, default=600.0, help="build limit, seconds (default 600)")
    parser.add_argument("--build-dir", type=Path, default=None, help="build cache (default $KERNELSWEEP_BUILD_DIR or ~/.cache/kernelsweep/build)")
    parser.add_argument("--log-dir", type=Path, default=None, help="worker logs (default: a new temporary folder)")
    parser.add_argument("--task-hash", default=None, help="task sha256 for provenance (default: hash of REFERENCE.py)")
    parser.add_argument("--cuda-arch", default=None, help="TORCH_CUDA_ARCH_LIST for builds (default: the GPU's, else 9.0)")
    parser.add_argument("--speedup-bound", type=positive_float, default=settings.SPEEDUP_BOUND,
                        help="speedups above this are labelled cheat (default 1000)")
    parser.add_argument("--equivalence-margin", type=float, default=metrics.EQUIVALENCE_MARGIN,
                        help="speedups within this relative margin of 1 are ties (default "
                             f"{metrics.EQUIVALENCE_MARGIN}; see kernelsweep.metrics)")
    parser.add_argument("--out", type=Path, default=None, help="also write the record here (atomically)")


def main(args: argparse.Namespace) -> int:
    from kernelsweep.evaluator import evaluate

    try:
        record = evaluate(args.reference, args.candidate, device=args.device, precision=args.precision,
                          trials=args.trials, timing_trials=args.timing_trials, warmup=args.warmup,
                          timeout_s=args.timeout, compile_timeout_s=args.compile_timeout,
                          build_dir=args.build_dir, log_dir=args.log_dir, task_sha256=args.task_hash,
                          cuda_arch=args.cuda_arch, speedup_bound=args.speedup_bound,
                          equivalence_margin=args.equivalence_margin)
    except HarnessError as exc:
        return fail("eval", str(exc))
    return emit("eval", record, args.out)
