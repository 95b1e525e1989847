"""Uncertainty over tasks: percentile bootstrap intervals that resample *tasks*
(the unit a benchmark samples), with a task's samples kept together. The
per-candidate timing interval lives in kernelsweep.core.metrics; this module only
resamples tasks and reuses metrics' seed, resample count and confidence, and
metrics.geometric_mean for every geometric mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from kernelsweep.core import metrics


@dataclass(frozen=True)
class Estimate:
    value: float | None
    lo: float | None  # None when there are fewer than 2 tasks (no interval)
    hi: float | None
    n: int  # tasks (for rates) or values (for geometric means)


def _task_resamples(n_tasks: int) -> np.ndarray:
    """Indices of resampled tasks, one row per bootstrap replicate; the fixed seed
    makes every table reproducible from the same files."""
    rng = np.random.default_rng(metrics.BOOTSTRAP_SEED)
    return rng.integers(0, n_tasks, size=(metrics.BOOTSTRAP_RESAMPLES, n_tasks))


def _interval(replicates: np.ndarray) -> tuple[float, float]:
    alpha = (1.0 - metrics.CONFIDENCE) / 2.0
    lo, hi = np.quantile(replicates, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def rate_over_tasks(task_scores: Sequence[float]) -> Estimate:
    """Mean of per-task scores (a task's score is the fraction of its samples that
    succeeded) with a bootstrap interval over tasks."""
    scores = np.asarray(task_scores, dtype=float)
    if scores.size == 0:
        return Estimate(None, None, None, 0)
    value = float(scores.mean())
    if scores.size < 2:
        return Estimate(value, None, None, 1)
    lo, hi = _interval(scores[_task_resamples(scores.size)].mean(axis=1))
    return Estimate(value, lo, hi, int(scores.size))


def rate_difference_over_tasks(scores: Sequence[float], reference: Sequence[float]) -> Estimate:
    """Paired difference of two rates on the same tasks (scores[i] and reference[i]
    belong to task i), resampling tasks jointly so the interval reflects the pairing."""
    a, b = np.asarray(scores, dtype=float), np.asarray(reference, dtype=float)
    if a.shape != b.shape:
        raise ValueError("paired scores must cover the same tasks")
    return rate_over_tasks(a - b) if a.size else Estimate(None, None, None, 0)


def geomean_over_tasks(values_by_task: Sequence[Sequence[float]]) -> Estimate:
    """Geometric mean of all values pooled (metrics.geometric_mean), with a bootstrap
    interval that resamples tasks and pools the values of the drawn tasks."""
    groups = [list(v) for v in values_by_task]
    pooled = [x for g in groups for x in g]
    value = metrics.geometric_mean(pooled)
    if value is None:
        return Estimate(None, None, None, 0)
    n_values = sum(1 for _ in pooled)
    if len(groups) < 2:
        return Estimate(value, None, None, n_values)
    replicates = []
    for row in _task_resamples(len(groups)):
        drawn = metrics.geometric_mean([x for i in row for x in groups[i]])
        if drawn is not None:
            replicates.append(drawn)
    lo, hi = _interval(np.asarray(replicates))
    return Estimate(value, lo, hi, n_values)
