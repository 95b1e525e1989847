"""`kernelsweep baseline-task`, the baseline stage as the study runs it: the evaluator's timing of eager
PyTorch and torch.compile on a reference (kernelsweep.evaluator.cli.Baseline,
same arguments, same record), except that a timing the machine failed is never
recorded.

The tasks stage already ran every reference, so eager PyTorch failing to be
timed, or any mode killed (`timeout`, `crash`, `out_of_memory`: the scheduler,
the OOM killer, a lost GPU), is not a property of the task: nothing is written,
the exit status is 3 and the next run times it again. A torch.compile mode
failing with an error of its own (inductor cannot lower an operator) is a
result and is recorded, as before.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

MACHINE_CATEGORIES = ("timeout", "crash", "out_of_memory")


def machine_fault(record: dict[str, Any]) -> str | None:
    """Which mode the machine failed and why, or None."""
    for mode, result in (record.get("modes") or {}).items():
        if result.get("status") == "failed" and (mode == "eager" or result.get("category") in MACHINE_CATEGORIES):
            return f"{mode} ({result.get('category')}): {result.get('error')}"
    return None


def configure(parser: argparse.ArgumentParser) -> None:
    from kernelsweep.evaluator.cli import Baseline

    Baseline.configure(parser)


def main(args: argparse.Namespace) -> int:
    from kernelsweep.evaluator import HarnessError
    from kernelsweep.evaluator.cli import Baseline, emit, fail

    try:
        record = Baseline.run(args)
    except HarnessError as exc:
        return fail("baseline", str(exc))
    fault = machine_fault(record)
    if fault is not None:
        print(f"kernelsweep baseline: {args.reference}: the machine failed the timing, nothing was recorded: "
              f"{fault}. Rerun the same command", file=sys.stderr)
        return 3
    return emit("baseline", record, args.out)
