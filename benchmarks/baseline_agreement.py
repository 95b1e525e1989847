"""Two runs of the baseline stage on the same references: how many 'mode faster
than eager' decisions disagree between them, each way of deciding side by side:

- paired: eager timed interleaved with the mode in its worker, faster / tie /
  slower from the interval and the margin (what the report uses); counted as
  'faster' (yes or no, the issue's count) and as the three-way verdict;
- apart: eager's own worker against the mode's, the point estimate (> 1 is
  "faster"), the way the drift of issue #36 arose.

A candidate's "faster than mode X" moves between runs exactly as eager / X does (its
own ref / candidate comes from its evaluation), so these counts bound the flips of
the study's "faster than torch.compile". Prints one line per reference and mode,
then the counts, and with --json the records and decisions.

    PYTHONPATH=src python3 benchmarks/baseline_agreement.py --device cpu
    PYTHONPATH=src python3 benchmarks/baseline_agreement.py --device cuda [--references L2/*.py ...] [--budget-s 400]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelsweep.core import metrics  # noqa: E402
from kernelsweep.evaluator import settings  # noqa: E402
from kernelsweep.evaluator.baseline import run_baseline  # noqa: E402

FIXTURES = ROOT / "tests" / "evaluator" / "fixtures" / "references"
DEFAULT_REFERENCES = ["vector_add.py", "linear_relu.py", "matmul_small.py", "softmax_wide.py", "matmul_long_k.py"]
# A convolution, so cudnn-benchmark has a choice to make (the fixtures have none).
CONV = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(64, 128, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(16, 64, 56, 56)]


def get_init_inputs():
    return []
"""


def decisions(record: dict, margin: float) -> dict[str, dict]:
    """Per mode but eager: the paired verdict and ratio, and the ratio across workers."""
    modes = record["modes"]
    eager = modes.get("eager") or {}
    out = {}
    for mode, entry in modes.items():
        if mode == "eager" or entry.get("status") != "ok":
            continue
        mode_samples = entry["runtime_ms"]["samples"]
        row = {"paired": None, "paired_ratio": None, "paired_ci": None, "apart_ratio": None}
        paired = entry.get("paired_eager_ms")
        if paired:
            comparison = metrics.compare_timings(paired["samples"], mode_samples, margin)
            row |= {"paired": comparison["verdict"], "paired_ratio": comparison["speedup"],
                    "paired_ci": comparison["speedup_ci"]}
        if eager.get("status") == "ok":
            row["apart_ratio"] = metrics.speedup(eager["runtime_ms"]["samples"], mode_samples)
        out[mode] = row
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=settings.DEVICES, default="cpu")
    parser.add_argument("--references", nargs="*", type=Path, default=None,
                        help="reference files (default: small fixtures, plus a convolution on CUDA)")
    parser.add_argument("--modes", default=",".join(settings.BASELINE_MODES))
    parser.add_argument("--timing-trials", type=int, default=100)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--margin", type=float, default=metrics.EQUIVALENCE_MARGIN)
    parser.add_argument("--work", type=Path, default=Path("/tmp/kernelsweep-baseline-agreement"))
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--budget-s", type=float, default=None,
                        help="stop starting references when the first run has used half of this, and the "
                             "second run when all of it is spent; the counts cover the references both runs timed")
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    references = args.references
    if references is None:
        references = [FIXTURES / name for name in DEFAULT_REFERENCES]
        if args.device == "cuda":
            conv = args.work / "conv_relu.py"
            conv.write_text(CONV)
            references.append(conv)
    modes = args.modes.split(",")
    runs: list[dict[str, dict]] = [{}, {}]
    records: list[dict[str, dict]] = [{}, {}]
    started = time.monotonic()
    for run in (0, 1):  # every reference once, then again: the second run comes minutes later, as a rerun would
        for reference in references:
            spent = time.monotonic() - started
            if args.budget_s is not None and spent > args.budget_s * (run + 1) / 2:
                print(f"run {run + 1}: budget spent after {spent:.0f} s; {reference.stem} and after not timed",
                      flush=True)
                break
            if run == 1 and reference.stem not in records[0]:
                break
            record = run_baseline(reference, device=args.device, modes=modes, timing_trials=args.timing_trials,
                                  warmup=args.warmup, timeout_s=args.timeout, log_dir=args.work / f"logs{run}")
            records[run][reference.stem] = record
            runs[run][reference.stem] = decisions(record, args.margin)
            print(f"run {run + 1}: {reference.stem} timed ({time.monotonic() - started:.0f} s)", flush=True)
    paired_flips = verdict_flips = apart_flips = paired_n = apart_n = 0
    shifts: dict[str, list[float]] = {"paired": [], "apart": []}
    print(f"{'reference':<18} {'mode':<26} {'paired run 1':>30} {'paired run 2':>30} {'apart 1':>8} {'apart 2':>8}")
    for name in runs[0]:
        for mode, first in runs[0][name].items():
            second = runs[1].get(name, {}).get(mode)
            if second is None:
                continue

            def show(row: dict) -> str:
                if row["paired_ratio"] is None:
                    return "n/a"
                lo, hi = row["paired_ci"] or (float("nan"), float("nan"))
                return f"{row['paired_ratio']:.3f} [{lo:.3f}, {hi:.3f}] {row['paired']}"

            apart = [row["apart_ratio"] for row in (first, second)]
            print(f"{name:<18} {mode:<26} {show(first):>30} {show(second):>30} "
                  + " ".join(f"{a:>8.3f}" if a else f"{'n/a':>8}" for a in apart))
            if first["paired"] and second["paired"]:
                paired_n += 1
                paired_flips += (first["paired"] == "faster") != (second["paired"] == "faster")
                verdict_flips += first["paired"] != second["paired"]
                shifts["paired"].append(abs(second["paired_ratio"] / first["paired_ratio"] - 1))
            if all(apart):
                apart_n += 1
                apart_flips += (apart[0] > 1) != (apart[1] > 1)
                shifts["apart"].append(abs(apart[1] / apart[0] - 1))
    print(f"\npaired (interval, margin {args.margin:g}): 'faster' disagrees in {paired_flips} of {paired_n}, "
          f"the verdict (faster / tie / slower) in {verdict_flips}; "
          f"largest ratio change {max(shifts['paired'], default=0):.1%}")
    print(f"apart (point estimate, eager in its own worker): 'faster' disagrees in {apart_flips} of {apart_n}; "
          f"largest ratio change {max(shifts['apart'], default=0):.1%}")
    if args.json:
        args.json.write_text(json.dumps({"device": args.device, "margin": args.margin, "decisions": runs,
                                         "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
