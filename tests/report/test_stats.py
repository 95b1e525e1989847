"""Bootstrap intervals over tasks: reproducible, they contain the estimate, they
collapse when every task agrees and narrow as tasks are added."""

import math

import pytest

from kernelsweep.report.stats import geomean_over_tasks, rate_difference_over_tasks, rate_over_tasks


def test_rate_is_the_mean_of_task_scores_with_a_reproducible_interval():
    scores = [1, 0, 1, 1, 0, 0.5]
    first, again = rate_over_tasks(scores), rate_over_tasks(scores)
    assert first == again
    assert first.value == pytest.approx(3.5 / 6) and first.n == 6
    assert 0 <= first.lo < first.value < first.hi <= 1


def test_unanimous_tasks_give_a_degenerate_interval_and_one_task_gives_none():
    assert rate_over_tasks([1, 1, 1]).lo == rate_over_tasks([1, 1, 1]).hi == 1.0
    one = rate_over_tasks([1])
    assert one.value == 1.0 and one.lo is None and one.hi is None
    assert rate_over_tasks([]).value is None


def test_more_tasks_give_a_narrower_interval():
    small, large = rate_over_tasks([1, 0] * 5), rate_over_tasks([1, 0] * 50)
    assert small.value == large.value == 0.5
    assert (large.hi - large.lo) < (small.hi - small.lo)


def test_paired_difference_cancels_shared_task_effects():
    # the variant gains exactly one success on every task: no spread, so the interval is [1, 1]
    base = [0, 0, 0, 0]
    variant = [1, 1, 1, 1]
    d = rate_difference_over_tasks(variant, base)
    assert (d.value, d.lo, d.hi) == (1.0, 1.0, 1.0)
    with pytest.raises(ValueError):
        rate_difference_over_tasks([1, 0], [1])


def test_geomean_pools_values_and_resamples_tasks():
    g = geomean_over_tasks([[2.0, 8.0], [4.0]])
    assert g.value == pytest.approx(4.0) and g.n == 3
    assert g.lo <= 4.0 <= g.hi and g.lo >= 2.0 and g.hi <= 8.0
    assert geomean_over_tasks([]).value is None
    single = geomean_over_tasks([[1.0, 4.0]])
    assert single.value == pytest.approx(2.0) and single.lo is None
    assert math.isclose(geomean_over_tasks([[3.0], [3.0]]).lo, 3.0)
