"""Speedup, its noise-aware interval, 'faster' and fast_p: one definition each,
used by the evaluator (per candidate) and the report (per table).

speedup      = median(reference times) / median(candidate times)
speedup_ci   = percentile bootstrap 95% interval of that ratio, resampling each
               side's timing samples independently
verdict      = 'faster' if the interval lies above 1 + m, 'slower' if below
               1 / (1 + m), else 'tie' (m: the equivalence margin)
fast_p       = correct AND custom kernel launched AND speedup_ci low end > p
               (for p = 1 and m = 0 this is exactly 'faster'; p = 0 is 'correct kernel')

The interval is the spread within one run. Between runs the same candidate's
speedup moves too (docs/decisions/2026-11-29-equivalence-margin.md), so a
speedup closer to 1 than the margin is a tie however tight its interval: a
verdict that a rerun would flip is not reported as faster or slower.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
CONFIDENCE = 0.95
BOOTSTRAP_SEED = 20241129  # fixed: the same samples always give the same interval
EQUIVALENCE_MARGIN = 0.01  # default m: within 1% of the reference counts as a tie


def summarize(samples_ms: Sequence[float]) -> dict[str, Any]:
    """Median, interquartile range, mean, std, min, max and n of timing samples (milliseconds)."""
    a = np.asarray(samples_ms, dtype=float)
    if a.size == 0:
        return {"median": None, "iqr": None, "mean": None, "std": None, "min": None, "max": None, "n": 0}
    return {
        "median": float(np.median(a)),
        "iqr": float(np.percentile(a, 75) - np.percentile(a, 25)),
        "mean": float(a.mean()),
        "std": float(a.std(ddof=1)) if a.size > 1 else 0.0,
        "min": float(a.min()),
        "max": float(a.max()),
        "n": int(a.size),
    }


def median(samples_ms: Sequence[float]) -> float:
    return float(np.median(np.asarray(samples_ms, dtype=float))) if len(samples_ms) else math.nan


def speedup(reference_ms: Sequence[float], candidate_ms: Sequence[float]) -> float | None:
    if len(reference_ms) == 0 or len(candidate_ms) == 0:
        return None
    cand = float(np.median(candidate_ms))
    if cand <= 0 or not math.isfinite(cand):
        return None
    return float(np.median(reference_ms)) / cand


def _bootstrap_interval(samples: Sequence[Sequence[float]], combine, resamples: int, confidence: float
                        ) -> tuple[float, float] | None:
    """Percentile interval of combine(median of each sample set), resampling each set
    independently (in the order given, from the fixed seed)."""
    arrays = [np.asarray(x, dtype=float) for x in samples]
    if any(a.size < 2 for a in arrays):
        return None
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    medians = [np.median(rng.choice(a, size=(resamples, a.size), replace=True), axis=1) for a in arrays]
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = combine(*medians)
    ratios = ratios[np.isfinite(ratios)]
    if ratios.size == 0:
        return None
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(ratios, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def speedup_interval(reference_ms: Sequence[float], candidate_ms: Sequence[float],
                     resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE
                     ) -> tuple[float, float] | None:
    """Bootstrap interval of median(ref)/median(cand)."""
    return _bootstrap_interval((reference_ms, candidate_ms), lambda ref, cand: ref / cand, resamples, confidence)


def check_margin(margin: float) -> float:
    margin = float(margin)
    if not 0.0 <= margin < 1.0 or not math.isfinite(margin):
        raise ValueError(f"the equivalence margin must be in [0, 1), got {margin!r}")
    return margin


def anchored_interval(reference_ms: Sequence[float], candidate_ms: Sequence[float],
                      anchor_ms: Sequence[float], other_ms: Sequence[float],
                      resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = CONFIDENCE
                      ) -> tuple[float, float] | None:
    """Bootstrap interval of [median(ref)/median(cand)] / [median(anchor)/median(other)]:
    the candidate against a baseline timed in another process, through the reference
    timed in both (see anchored_comparison)."""
    return _bootstrap_interval((reference_ms, candidate_ms, anchor_ms, other_ms),
                               lambda ref, cand, anchor, other: (ref / cand) / (anchor / other), resamples,
                               confidence)


def timing_verdict(interval: tuple[float, float] | None, margin: float = EQUIVALENCE_MARGIN) -> str | None:
    """'faster', 'slower' or 'tie' from the speedup interval; never from rounding."""
    if interval is None:
        return None
    margin = check_margin(margin)
    lo, hi = interval
    if lo > 1.0 + margin:
        return "faster"
    if hi < 1.0 / (1.0 + margin):
        return "slower"
    return "tie"


def compare_timings(reference_ms: Sequence[float], candidate_ms: Sequence[float],
                    margin: float = EQUIVALENCE_MARGIN) -> dict[str, Any]:
    """Everything the evaluator and the report record about one comparison."""
    return _comparison(speedup(reference_ms, candidate_ms), speedup_interval(reference_ms, candidate_ms), margin)


def _comparison(value: float | None, interval: tuple[float, float] | None, margin: float) -> dict[str, Any]:
    verdict = timing_verdict(interval, margin)
    return {
        "speedup": value,
        "speedup_ci": list(interval) if interval else None,
        "verdict": verdict,
        "faster": None if verdict is None else verdict == "faster",
    }


def anchored_comparison(reference_ms: Sequence[float], candidate_ms: Sequence[float],
                        anchor_ms: Sequence[float], other_ms: Sequence[float],
                        margin: float = EQUIVALENCE_MARGIN) -> dict[str, Any]:
    """The candidate against `other` (e.g. a torch.compile mode) when the two were
    timed in different processes. Absolute times drift between processes by
    more than a speedup's interval (docs/decisions/2026-11-29-compile-through-eager.md),
    but each process's ratio to the reference it timed beside it does not: so
    speedup = (ref / cand, from the evaluator) / (anchor / other, from the
    baseline stage, anchor = the reference there). Same record as compare_timings."""
    ref_cand, anchor_other = speedup(reference_ms, candidate_ms), speedup(anchor_ms, other_ms)
    return _comparison(ref_cand / anchor_other if ref_cand is not None and anchor_other else None,
                       anchored_interval(reference_ms, candidate_ms, anchor_ms, other_ms), margin)


def is_fast_p(result: Mapping[str, Any], p: float, interval_key: str = "speedup_ci") -> bool:
    """fast_p membership of one evaluated candidate (see module docstring)."""
    if not (result.get("correct") and result.get("custom_kernel")):
        return False
    interval = result.get(interval_key)
    if not interval:
        return False
    return float(interval[0]) > p


def geometric_mean(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return float(math.exp(sum(math.log(v) for v in vals) / len(vals)))
