"""Who slowed the reference? A reference timed slower beside the candidate
than alone is blamed on the candidate only when the slowdown goes away with
it, between two adjacent measurements; load from elsewhere that comes and goes
during the timing (other jobs on a shared node) is never a cheat."""

from __future__ import annotations

import pytest

from kernelsweep.evaluator.judge import timing as timing_duty
from kernelsweep.evaluator.judge.timing import slowdown_is_the_candidates

ALONE = [1.0] * 10
FAST, SLOW = [1.05] * 10, [3.0] * 10


@pytest.mark.parametrize("beside, after, blamed, what", [
    (SLOW, FAST, True, "slow beside the candidate, fast again once it ended"),
    (SLOW, SLOW, False, "still slow without the candidate: the machine is loaded"),
    (FAST, FAST, False, "load came during the timed blocks and went before the blame"),
    (FAST, SLOW, False, "load came as the candidate ended"),
    ([1.05] * 4 + [3.0] * 6, FAST, False, "a burst of load from elsewhere during part of the calls beside it"),
    ([1.05] * 2 + [3.0] * 8, FAST, True, "slow in most calls beside it, fast once it ended"),
])
def test_slowdown_rule(beside, after, blamed, what):
    assert slowdown_is_the_candidates(beside, after, ALONE, ratio=2.0) is blamed, what


def test_blame_path_times_the_reference_beside_and_after_the_candidate(run_eval, cpu_library, monkeypatch):
    # Every reference counts as slowed (ratio 0), so an honest kernel goes through the
    # blame: the candidate is ended mid-evaluation and the reference timed on both
    # sides of that. Both sides are equally slow by the same measure, so no blame.
    monkeypatch.setitem(timing_duty.SLOWED_RATIO, "cpu", 0.0)
    r = run_eval("slow_add", "cpp_add")
    timing = r["timing"]
    assert timing["block_calls"] == timing_duty.BLOCK_CALLS["cpu"]  # small outputs: a full block
    assert timing["reference_beside_candidate_ms"] > 0 and timing["reference_after_candidate_ms"] > 0
    assert "reference_slowed" not in r["flags"]
    assert r["correct"] is True and r["custom_kernel"] is True, (r["category"], r["error"], r["flags"])
