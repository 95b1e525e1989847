"""Timing comparisons of a candidate against the baselines.

Against eager PyTorch the report uses the evaluator's own measurement (reference
and candidate interleaved in one process). Against torch.compile it compares
the candidate's timing samples with the baseline stage's samples for each mode
(measured in a separate process, on the same kind of device) through
kernelsweep.metrics.compare_timings; "compile" is the fastest usable mode of
the task, so beating it means beating every torch.compile mode measured."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from kernelsweep import metrics

BEST_COMPILE = "compile"  # column prefix of the comparison with the fastest torch.compile mode


def column_prefix(mode: str) -> str:
    return mode.replace("-", "_")


@dataclass
class Baseline:
    """One task's baseline record, reduced to what the comparisons need."""

    task: str
    samples: dict[str, list[float]] = field(default_factory=dict)  # usable modes only
    unusable: dict[str, str] = field(default_factory=dict)  # mode -> why it cannot be compared
    device_name: str | None = None
    precision: str | None = None

    def best_compile_mode(self, compile_modes: tuple[str, ...]) -> str | None:
        usable = [m for m in compile_modes if m in self.samples]
        if not usable:
            return None
        return min(usable, key=lambda m: metrics.summarize(self.samples[m])["median"])


def parse_baseline(task: str, record: Mapping[str, Any], modes: tuple[str, ...]) -> Baseline:
    baseline = Baseline(task=task, device_name=record.get("device_name"), precision=record.get("precision"))
    recorded = record.get("modes") or {}
    for mode in modes:
        entry = recorded.get(mode)
        if not isinstance(entry, Mapping):
            baseline.unusable[mode] = "not measured"
            continue
        if entry.get("error"):
            baseline.unusable[mode] = f"failed: {entry['error']}"
            continue
        samples = (entry.get("runtime_ms") or {}).get("samples") or []
        if len(samples) < 2:
            baseline.unusable[mode] = "fewer than 2 timing samples"
            continue
        baseline.samples[mode] = [float(x) for x in samples]
    return baseline


def _blank(prefix: str) -> dict[str, Any]:
    return {f"speedup_{prefix}": None, f"speedup_{prefix}_lo": None, f"speedup_{prefix}_hi": None,
            f"verdict_{prefix}": None, f"faster_{prefix}": None}


def _columns(prefix: str, comparison: Mapping[str, Any]) -> dict[str, Any]:
    ci = comparison.get("speedup_ci") or [None, None]
    return {f"speedup_{prefix}": comparison.get("speedup"), f"speedup_{prefix}_lo": ci[0],
            f"speedup_{prefix}_hi": ci[1], f"verdict_{prefix}": comparison.get("verdict"),
            f"faster_{prefix}": comparison.get("faster")}


def compile_column_names(compile_modes: tuple[str, ...]) -> list[str]:
    names: list[str] = []
    for prefix in [*map(column_prefix, compile_modes), BEST_COMPILE]:
        names += list(_blank(prefix))
    return names + ["best_compile_mode"]


def timing_column_names(compile_modes: tuple[str, ...]) -> list[str]:
    return list(_blank("eager")) + compile_column_names(compile_modes)


class Comparator:
    """Speedup columns of an eval record; compile comparisons are memoised because
    a cell's final result repeats one of its candidates."""

    def __init__(self, compile_modes: tuple[str, ...]):
        self.compile_modes = compile_modes
        self._memo: dict[tuple, dict[str, Any]] = {}

    def columns(self, result: Mapping[str, Any] | None, baseline: Baseline | None) -> dict[str, Any]:
        row: dict[str, Any] = {}
        result = result or {}
        ci = result.get("speedup_ci") or [None, None]
        row.update({"speedup_eager": result.get("speedup"), "speedup_eager_lo": ci[0], "speedup_eager_hi": ci[1],
                    "verdict_eager": result.get("timing_verdict"), "faster_eager": result.get("faster")})
        samples = tuple((result.get("runtime_ms") or {}).get("samples") or ())
        best = baseline.best_compile_mode(self.compile_modes) if baseline else None
        for mode in self.compile_modes:
            prefix = column_prefix(mode)
            if baseline is None or mode not in baseline.samples or len(samples) < 2:
                row.update(_blank(prefix))
                continue
            row.update(_columns(prefix, self._compare(baseline, mode, samples)))
        if best is None or len(samples) < 2:
            row.update(_blank(BEST_COMPILE))
        else:
            row.update(_columns(BEST_COMPILE, self._compare(baseline, best, samples)))
        row["best_compile_mode"] = best
        return row

    def _compare(self, baseline: Baseline, mode: str, samples: tuple[float, ...]) -> dict[str, Any]:
        key = (baseline.task, mode, samples)
        if key not in self._memo:
            self._memo[key] = metrics.compare_timings(baseline.samples[mode], list(samples))
        return self._memo[key]
