"""Per-group numbers from the tidy cell table: rates with intervals over tasks,
fast_p (kernelsweep.core.metrics.is_fast_p), faster/tie/slower counts and geometric
means. Denominators are always the cells with a final result; missing cells
never enter them."""

from __future__ import annotations

from typing import Any, Iterator

import pandas as pd

from kernelsweep.core import metrics
from kernelsweep.report.baselines import BEST_COMPILE
from kernelsweep.report.spec import StudySpec
from kernelsweep.report.stats import Estimate, geomean_over_tasks, rate_difference_over_tasks, rate_over_tasks

FAST_P = (0.0, 1.0, 1.5, 2.0)
AGAINST = ("eager", BEST_COMPILE)  # the evaluator's eager measurement; the fastest torch.compile mode
EXCLUDED_STATUSES = ("missing", "unreadable")


def groups(cells: pd.DataFrame, spec: StudySpec) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(model, method, that group's cells) in the study's order."""
    for model in spec.models:
        for method in spec.methods:
            yield model, method, cells[(cells["model"] == model) & (cells["method"] == method)]


def with_result(cells: pd.DataFrame) -> pd.DataFrame:
    return cells[cells["has_result"].fillna(False).astype(bool)]


def denominator(cells: pd.DataFrame, against: str = "eager") -> pd.DataFrame:
    """Cells that count for a comparison: those with a final result and, against
    torch.compile, only tasks with a usable compile baseline."""
    counted = with_result(cells)
    if against == BEST_COMPILE:
        counted = counted[counted["compile_baseline"].fillna(False).astype(bool)]
    return counted


def task_scores(cells: pd.DataFrame, indicator: pd.Series) -> pd.Series:
    """Per task, the fraction of its samples where the indicator holds."""
    return indicator.astype(float).groupby(cells["task"]).mean()


def rate(cells: pd.DataFrame, indicator: pd.Series) -> Estimate:
    return rate_over_tasks(task_scores(cells, indicator).to_numpy())


def flag(cells: pd.DataFrame, column: str) -> pd.Series:
    return cells[column].fillna(False).astype(bool)


def fast_p(cells: pd.DataFrame, p: float, against: str) -> pd.Series:
    """fast_p membership of each cell's final result (metrics.is_fast_p)."""
    columns = zip(cells["correct"], cells["custom_kernel"], cells[f"speedup_{against}_lo"],
                  cells[f"speedup_{against}_hi"])
    members = [metrics.is_fast_p({"correct": _true(correct), "custom_kernel": _true(custom),
                                  "speedup_ci": None if pd.isna(lo) or pd.isna(hi) else [float(lo), float(hi)]}, p)
               for correct, custom, lo, hi in columns]
    return pd.Series(members, index=cells.index, dtype=bool)


def _true(value: Any) -> bool:
    return False if pd.isna(value) else bool(value)


def verdict_counts(cells: pd.DataFrame, against: str) -> dict[str, int]:
    """faster / tie / slower among correct custom kernels; 'untimed' has no interval."""
    success = cells[flag(cells, "kernel_success")]
    verdicts = success[f"verdict_{against}"]
    return {"faster": int((verdicts == "faster").sum()), "tie": int((verdicts == "tie").sum()),
            "slower": int((verdicts == "slower").sum()), "untimed": int(verdicts.isna().sum())}


def geomean_speedup(cells: pd.DataFrame, against: str) -> Estimate:
    """Geometric-mean speedup over the correct custom kernels, interval over tasks."""
    success = cells[flag(cells, "kernel_success")]
    speedups = success[f"speedup_{against}"]
    timed = success[speedups.notna() & (speedups > 0)]
    by_task = [list(v) for _, v in timed.groupby("task")[f"speedup_{against}"]]
    return geomean_over_tasks(by_task)


def paired_difference(variant: pd.DataFrame, base: pd.DataFrame, indicator) -> Estimate:
    """Difference of a rate between two methods on the tasks both have results for."""
    a = task_scores(variant, indicator(variant))
    b = task_scores(base, indicator(base))
    common = a.index.intersection(b.index).sort_values()
    return rate_difference_over_tasks(a[common].to_numpy(), b[common].to_numpy())


def mean_per_cell(cells: pd.DataFrame, column: str) -> float | None:
    values = cells[column].dropna()
    return float(values.mean()) if len(values) else None


def summary(cells: pd.DataFrame) -> dict[str, Any]:
    """Every headline number of one group of cells (numbers, not text)."""
    counted = with_result(cells)
    out: dict[str, Any] = {
        "cells_expected": len(cells),
        "cells_with_result": len(counted),
        "cells_missing": int(cells["status"].isin(EXCLUDED_STATUSES).sum()),
        "cells_failed": int((counted["status"] != "evaluated").sum()),
        "tasks_with_result": int(counted["task"].nunique()),
        "plain_pytorch_correct": int(flag(counted, "plain_pytorch_correct").sum()),
        "cheats": int((counted["category"] == "cheat").sum()),
        "kernel_successes": int(flag(counted, "kernel_success").sum()),
    }
    for name, column in (("compiled", "compiled"), ("correct", "correct"), ("kernel_success", "kernel_success"),
                         ("plain_pytorch", "plain_pytorch_correct"), ("correct_task_shape", "correct_task_shape")):
        _put(out, name, rate(counted, flag(counted, column)))
    for against in AGAINST:
        base = denominator(cells, against)
        out[f"cells_{against}"] = len(base)
        for p in FAST_P:
            _put(out, f"fast_{p:g}_{against}", rate(base, fast_p(base, p, against)))
        for verdict_name, count in verdict_counts(base, against).items():
            out[f"{verdict_name}_{against}"] = count
        estimate = geomean_speedup(base, against)
        out.update({f"geomean_{against}": estimate.value, f"geomean_{against}_lo": estimate.lo,
                    f"geomean_{against}_hi": estimate.hi, f"geomean_{against}_n": estimate.n})
    out["llm_calls_per_cell"] = mean_per_cell(counted, "llm_calls")
    out["tokens_per_cell"] = mean_per_cell(counted, "tokens")
    return out


class Summaries:
    """summary() of each (model, method), computed once for all the tables."""

    def __init__(self, cells: pd.DataFrame):
        self.cells = cells
        self._done: dict[tuple[str, str], dict[str, Any]] = {}

    def __call__(self, model: str, method: str) -> dict[str, Any]:
        if (model, method) not in self._done:
            cells = self.cells
            self._done[model, method] = summary(cells[(cells["model"] == model) & (cells["method"] == method)])
        return self._done[model, method]


def _put(out: dict[str, Any], name: str, estimate: Estimate) -> None:
    """A rate as percent with its interval."""
    scale = lambda v: None if v is None else 100.0 * v  # noqa: E731
    out[f"{name}_pct"] = scale(estimate.value)
    out[f"{name}_lo"], out[f"{name}_hi"] = scale(estimate.lo), scale(estimate.hi)
