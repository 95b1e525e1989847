"""The evaluator's subcommands: `kernelsweep eval`, `compile` and `baseline`.
Each prints one JSON record; exit 0 whenever the step completed, whatever
its verdict, and 2 when the harness could not run. Defaults come from
settings.EvalSettings (the only place they are defined)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

from kernelsweep.core import fileio
from kernelsweep.evaluator import settings
from kernelsweep.evaluator.errors import HarnessError

DEFAULTS = {f.name: f.default for f in fields(settings.EvalSettings)}
BASELINE = settings.BaselineSettings()


def _number(kind: type, accept, rule: str):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"not {'an integer' if kind is int else 'a number'}: {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(f"{rule}: {value}")
        return value
    return parse


positive_int = _number(int, lambda v: v >= 1, "must be at least 1")
non_negative_int = _number(int, lambda v: v >= 0, "must not be negative")
positive_float = _number(float, lambda v: v > 0, "must be positive")


def emit(command: str, record: dict[str, Any], out: Path | None) -> int:
    """Print the record as JSON; write it to OUT atomically when asked."""
    text = fileio.dumps(record)
    if out is not None:
        try:
            fileio.write_atomic(out, text)
        except OSError as exc:
            print(f"kernelsweep {command}: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def fail(command: str, message: str) -> int:
    print(f"kernelsweep {command}: {message}", file=sys.stderr)
    return 2


class Eval:
    """`kernelsweep eval REFERENCE.py CANDIDATE.py`: evaluate one candidate (docs/results.md)."""

    @staticmethod
    def configure(parser: argparse.ArgumentParser) -> None:
        d = DEFAULTS
        parser.add_argument("reference", type=Path, metavar="REFERENCE.py",
                            help="KernelBench module: Model, get_inputs, get_init_inputs")
        parser.add_argument("candidate", type=Path, metavar="CANDIDATE.py", help="module defining ModelNew")
        parser.add_argument("--device", choices=settings.DEVICES, default=d["device"])
        parser.add_argument("--precision", choices=settings.PRECISIONS, default=d["precision"])
        parser.add_argument("--trials", type=positive_int, default=d["trials"],
                            help=f"correctness trials (default {d['trials']})")
        parser.add_argument("--timing-trials", type=positive_int, default=d["timing_trials"],
                            help=f"timed calls per side (default {d['timing_trials']})")
        parser.add_argument("--warmup", type=non_negative_int, default=d["warmup"],
                            help=f"discarded warm-up calls per side (default {d['warmup']})")
        parser.add_argument("--timeout", type=positive_float, default=d["timeout_s"],
                            help=f"run limit per worker, seconds (default {d['timeout_s']:g})")
        parser.add_argument("--compile-timeout", type=positive_float, default=d["compile_timeout_s"],
                            help=f"build limit, seconds (default {d['compile_timeout_s']:g})")
        parser.add_argument("--build-dir", type=Path, default=None,
                            help="build cache (default $KERNELSWEEP_BUILD_DIR or ~/.cache/kernelsweep/build)")
        parser.add_argument("--log-dir", type=Path, default=None,
                            help="keep the worker logs here (default: not kept)")
        parser.add_argument("--task-hash", default=None, help="task sha256 for provenance (default: hash of REFERENCE.py)")
        parser.add_argument("--cuda-arch", default=None, help="TORCH_CUDA_ARCH_LIST for builds (default: the GPU's, else 9.0)")
        parser.add_argument("--speedup-bound", type=positive_float, default=d["speedup_bound"],
                            help="a speedup above this is a cheat (excessive_speedup)")
        parser.add_argument("--equivalence-margin", type=float, default=d["equivalence_margin"],
                            help="faster/slower need the speedup interval beyond this margin around 1")
        parser.add_argument("--tolerance", choices=settings.TOLERANCE_PROFILES, default=d["tolerance"],
                            help="how outputs are compared: ours (KernelBench's bound widened by the reference's "
                                 "own rounding, measured in float64), kb (1e-4 at fp32, KernelBench), kb-v0 "
                                 f"(1e-2 for every precision); docs/taxonomy.md (default {d['tolerance']})")
        parser.add_argument("--shape-variants", type=non_negative_int, default=d["shape_variants"],
                            help="shape variants checked besides the task's shape "
                                 f"(kernelsweep.core.shapes; 0: off; default {d['shape_variants']})")
        parser.add_argument("--out", type=Path, default=None, help="also write the record here (atomically)")

    @staticmethod
    def main(args: argparse.Namespace) -> int:
        from kernelsweep.evaluator import evaluate

        try:
            record = evaluate(args.reference, args.candidate, device=args.device, precision=args.precision,
                              trials=args.trials, timing_trials=args.timing_trials, warmup=args.warmup,
                              timeout_s=args.timeout, compile_timeout_s=args.compile_timeout,
                              build_dir=args.build_dir, log_dir=args.log_dir, task_sha256=args.task_hash,
                              cuda_arch=args.cuda_arch, speedup_bound=args.speedup_bound,
                              equivalence_margin=args.equivalence_margin, shape_variants=args.shape_variants,
                              tolerance=args.tolerance)
        except HarnessError as exc:
            return fail("eval", str(exc))
        return emit("eval", record, args.out)


class Compile:
    """`kernelsweep compile CANDIDATE.py`: build a candidate's extensions (no GPU)."""

    @staticmethod
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("candidate", type=Path, metavar="CANDIDATE.py")
        parser.add_argument("--build-dir", type=Path, default=None,
                            help="build cache (default $KERNELSWEEP_BUILD_DIR or ~/.cache/kernelsweep/build)")
        parser.add_argument("--device", choices=settings.DEVICES, default=DEFAULTS["device"],
                            help="target the build is for")
        parser.add_argument("--cuda-arch", default=None, help="TORCH_CUDA_ARCH_LIST (default: the visible GPU's, else 9.0)")
        parser.add_argument("--timeout", type=positive_float, default=DEFAULTS["compile_timeout_s"],
                            help=f"build limit, seconds (default {DEFAULTS['compile_timeout_s']:g})")
        parser.add_argument("--log-dir", type=Path, default=None, help="where the build log goes (default BUILD_DIR/logs)")
        parser.add_argument("--reference", type=Path, default=None, metavar="TASK.py",
                            help="the task's reference: also build what ModelNew builds in __init__ or forward")
        parser.add_argument("--out", type=Path, default=None, help="also write the record here (atomically)")

    @staticmethod
    def main(args: argparse.Namespace) -> int:
        from kernelsweep.evaluator import compile_candidate

        try:
            record = compile_candidate(args.candidate, device=args.device, build_dir=args.build_dir,
                                       timeout_s=args.timeout, log_dir=args.log_dir, cuda_arch=args.cuda_arch,
                                       reference=args.reference)
        except HarnessError as exc:
            return fail("compile", str(exc))
        return emit("compile", record, args.out)


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in settings.BASELINE_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(settings.BASELINE_MODES)}")
    return modes


class Baseline:
    """`kernelsweep baseline REFERENCE.py`: time eager PyTorch and torch.compile modes."""

    @staticmethod
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("reference", type=Path, metavar="REFERENCE.py")
        parser.add_argument("--device", choices=settings.DEVICES, default=DEFAULTS["device"])
        parser.add_argument("--precision", choices=settings.PRECISIONS, default=DEFAULTS["precision"])
        parser.add_argument("--modes", type=_modes, default=list(BASELINE.modes),
                            help="comma-separated, from " + ",".join(settings.BASELINE_MODES))
        parser.add_argument("--timing-trials", type=positive_int, default=BASELINE.timing_trials)
        parser.add_argument("--warmup", type=non_negative_int, default=BASELINE.warmup)
        parser.add_argument("--timeout", type=positive_float, default=BASELINE.timeout_s,
                            help=f"limit per mode, seconds (default {BASELINE.timeout_s:g})")
        parser.add_argument("--task", default=None, help="task id recorded in the result (default: file stem)")
        parser.add_argument("--log-dir", type=Path, default=None)
        parser.add_argument("--out", type=Path, default=None, help="also write the record here (atomically)")

    @staticmethod
    def run(args: argparse.Namespace) -> dict[str, Any]:
        """The baseline record for these arguments (HarnessError when it cannot run)."""
        from kernelsweep.evaluator import run_baseline

        return run_baseline(args.reference, device=args.device, precision=args.precision, modes=args.modes,
                            timing_trials=args.timing_trials, warmup=args.warmup, timeout_s=args.timeout,
                            task=args.task, log_dir=args.log_dir)

    @staticmethod
    def main(args: argparse.Namespace) -> int:
        try:
            record = Baseline.run(args)
        except HarnessError as exc:
            return fail("baseline", str(exc))
        return emit("baseline", record, args.out)
