"""Work that escapes a call's end event (judge/timing.escapes_end_event): the
candidate's synchronized calls exceed its event-timed ones by more than the
reference's do. Pure numbers: the GPU suite runs the side-stream candidates."""

from __future__ import annotations

import pytest

from kernelsweep.evaluator.judge.timing import escapes_end_event

EVENTS = [1.0] * 20  # ms: the candidate's calls timed by their events
REF_EVENTS, REF_SYNCED = [2.0] * 20, 2.05  # the reference pays 0.05 ms for the synchronize


@pytest.mark.parametrize("synced, escapes, what", [
    ([1.05] * 5, False, "the synchronize costs it what it costs the reference"),
    ([2.5] * 5, True, "1.5 ms more per call once synchronized: its work outlives the end event"),
    ([1.05, 1.05, 1.05, 9.0, 9.0], False, "two of five calls delayed (host load): the median holds"),
    ([1.4] * 5, False, "0.35 ms over the reference's cost: within half its own time"),
])
def test_escapes_end_event(synced, escapes, what):
    assert escapes_end_event(EVENTS, synced, REF_EVENTS, REF_SYNCED) is escapes, what


def test_microsecond_calls_need_a_floor():
    """A 5 µs call costs 15 µs more synchronized, 10 µs more than the reference
    pays: under the 20 µs floor, so not hidden work; 50 µs more is."""
    assert not escapes_end_event([0.005] * 20, [0.02] * 5, [0.004] * 20, 0.009)
    assert escapes_end_event([0.005] * 20, [0.06] * 5, [0.004] * 20, 0.009)
