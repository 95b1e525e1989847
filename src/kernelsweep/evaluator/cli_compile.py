"""`kernelsweep compile CANDIDATE.py --build-dir DIR`: build a candidate's
extensions into the hash-keyed build cache without a GPU, and print the
build record. Exit 0 whether or not the build succeeded; 2 when the harness
could not run."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelsweep.evaluator import settings
from kernelsweep.evaluator.cli_common import emit, fail, positive_float
from kernelsweep.evaluator.errors import HarnessError


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("candidate", type=Path, metavar="CANDIDATE.py")
    parser.add_argument("--build-dir", type=Path, default=None, help="build cache (default $KERNELSWEEP_BUILD_DIR or ~/.cache/kernelsweep/build)")
    parser.add_argument("--device", choices=settings.DEVICES, default="cuda", help="target the build is for")
    parser.add_argument("--cuda-arch", default=None, help="TORCH_CUDA_ARCH_LIST (default: the visible GPU's, else 9.0)")
    parser.add_argument("--timeout", type=positive_float, default=600.0, help="build limit, seconds (default 600)")
    parser.add_argument("--log-dir", type=Path, default=None, help="where the build log goes (default BUILD_DIR/logs)")
    parser.add_argument("--out", type=Path, default=None, help="also write the record here (atomically)")


def main(args: argparse.Namespace) -> int:
    from kernelsweep.evaluator import compile_candidate

    try:
        record = compile_candidate(args.candidate, device=args.device, build_dir=args.build_dir,
                                   timeout_s=args.timeout, log_dir=args.log_dir, cuda_arch=args.cuda_arch)
    except HarnessError as exc:
        return fail("compile", str(exc))
    return emit("compile", record, args.out)
