"""The evaluator: judge a candidate ModelNew against a KernelBench reference,
with every piece of candidate code run in isolated worker processes.

Public API (imported lazily, so worker processes stay light):
    evaluate(reference, candidate, *, device, precision, trials, timing_trials, warmup,
             timeout_s, compile_timeout_s, build_dir, log_dir, task_sha256=None) -> dict
    compile_candidate(candidate, *, device, build_dir, timeout_s, log_dir) -> dict
    run_baseline(reference, *, device, precision, modes, timing_trials, warmup, timeout_s) -> dict
    HarnessError: raised only when the harness itself cannot run.
"""

from __future__ import annotations

from typing import Any

from kernelsweep.evaluator.errors import HarnessError

__all__ = ["evaluate", "compile_candidate", "run_baseline", "HarnessError"]


def evaluate(reference, candidate, **kwargs: Any) -> dict:
    from kernelsweep.evaluator.evaluation import evaluate as _evaluate

    return _evaluate(reference, candidate, **kwargs)


def compile_candidate(candidate, **kwargs: Any) -> dict:
    from kernelsweep.evaluator.build import compile_candidate as _compile

    return _compile(candidate, **kwargs)


def run_baseline(reference, **kwargs: Any) -> dict:
    from kernelsweep.evaluator.baseline import run_baseline as _baseline

    return _baseline(reference, **kwargs)
