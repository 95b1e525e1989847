"""The one definition of faster / tie / slower, with its equivalence margin."""

import math

import pytest

from kernelsweep.core import metrics


@pytest.mark.parametrize("interval, margin, expected", [
    ((1.005, 1.012), 0.0, "faster"),    # tight, but a rerun moves a speedup by this much
    ((1.005, 1.012), 0.01, "tie"),
    ((1.011, 1.03), 0.01, "faster"),
    ((0.985, 0.989), 0.01, "slower"),   # below 1 / 1.01 = 0.990099...
    ((0.9905, 0.995), 0.01, "tie"),
    ((0.98, 1.02), 0.0, "tie"),
    (None, 0.01, None),
])
def test_verdict_from_interval_and_margin(interval, margin, expected):
    assert metrics.timing_verdict(interval, margin) == expected


def test_margin_is_symmetric_on_the_ratio_scale():
    m = 0.05
    assert metrics.timing_verdict((1.0 + m + 1e-9, 2.0), m) == "faster"
    assert metrics.timing_verdict((0.5, 1.0 / (1.0 + m) - 1e-9), m) == "slower"
    assert metrics.timing_verdict((1.0 / (1.0 + m), 1.0 + m), m) == "tie"


def test_compare_timings_applies_the_margin():
    ref = [1.0, 1.001, 0.999, 1.0] * 10
    cand = [x / 1.005 for x in ref]  # 0.5% faster, no spread in the ratio
    assert metrics.compare_timings(ref, cand, 0.0)["verdict"] == "faster"
    tie = metrics.compare_timings(ref, cand, 0.01)
    assert tie["verdict"] == "tie" and tie["faster"] is False
    assert tie["speedup"] == pytest.approx(1.005)


@pytest.mark.parametrize("bad", [-0.01, 1.0, 2.0, math.nan, math.inf])
def test_bad_margins_are_refused(bad):
    with pytest.raises(ValueError, match="equivalence margin"):
        metrics.timing_verdict((1.0, 1.1), bad)


def test_anchored_comparison_goes_through_the_shared_reference():
    # evaluator: reference 2.0 ms, candidate 1.0 ms; baseline stage (10% slower clock): eager 2.2, compiled 1.65
    ref, cand, eager, compiled = [2.0] * 10, [1.0] * 10, [2.2] * 10, [1.65] * 10
    r = metrics.anchored_comparison(ref, cand, eager, compiled, margin=0.01)
    assert r["speedup"] == pytest.approx(2.0 / (2.2 / 1.65)) == pytest.approx(1.5)
    assert r["speedup_ci"] == pytest.approx([1.5, 1.5]) and r["verdict"] == "faster"
    # no drift: the same number as comparing absolute times
    assert metrics.anchored_comparison(ref, cand, ref, compiled)["speedup"] == pytest.approx(1.65)
    assert metrics.anchored_comparison(ref, cand, eager, [1.0])["speedup_ci"] is None  # one sample: no interval
