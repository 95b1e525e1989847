"""`kernelsweep baseline REFERENCE.py --device D`: time eager PyTorch and
torch.compile modes on a reference and print the baseline record. A mode that
fails records its error; the others still run."""

from __future__ import annotations

import argparse
from pathlib import Path

from kernelsweep.evaluator import settings
from kernelsweep.evaluator.cli_common import emit, fail, non_negative_int, positive_float, positive_int
from kernelsweep.evaluator.errors import HarnessError


def _modes(text: str) -> list[str]:
    modes = [m.strip() for m in text.split(",") if m.strip()]
    unknown = [m for m in modes if m not in settings.BASELINE_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(
            f"unknown mode(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(settings.BASELINE_MODES)}")
    return modes


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reference", type=Path, metavar="REFERENCE.py")
    parser.add_argument("--device", choices=settings.DEVICES, default="cuda")
    parser.add_argument("--precision", choices=settings.PRECISIONS, default="fp32")
    parser.add_argument("--modes", type=_modes, default=list(settings.BASELINE_MODES),
                        help="comma-separated, from " + ",".join(settings.BASELINE_MODES))
    parser.add_argument("--timing-trials", type=positive_int, default=100)
    parser.add_argument("--warmup", type=non_negative_int, default=5)
    parser.add_argument("--timeout", type=positive_float, default=600.0, help="limit per mode, seconds (default 600)")
    parser.add_argument("--task", default=None, help="task id recorded in the result (default: file stem)")
    parser.add_argument("--log-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="also write the record here (atomically)")


def main(args: argparse.Namespace) -> int:
    from kernelsweep.evaluator import run_baseline

    try:
        record = run_baseline(args.reference, device=args.device, precision=args.precision, modes=args.modes,
                              timing_trials=args.timing_trials, warmup=args.warmup, timeout_s=args.timeout,
                              task=args.task, log_dir=args.log_dir)
    except HarnessError as exc:
        return fail("baseline", str(exc))
    return emit("baseline", record, args.out)
