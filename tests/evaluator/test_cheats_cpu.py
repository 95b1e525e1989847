"""Each cheat family ends as `cheat` or as a failure, never as a correct (or
faster) result."""

from __future__ import annotations

import pytest

CHEATS = [
    # (reference, candidate, expected category, flag that must be raised)
    ("add", "cheat_mutate_inputs", "cheat", "mutates_inputs"),
    ("near_identity", "cheat_returns_input", "cheat", "returns_input"),
    ("add", "cheat_thread", "cheat", "output_changed_after_return"),
    # A stale answer returned in the same tensor: wrong on the trial's new inputs.
    ("add", "cheat_cached_output", "wrong_output", "reuses_output_storage"),
    # Recomputed in the trials, only sometimes once timed: right when judged, wrong when timed.
    ("add", "buffer_stale_when_timed", "cheat", "timing_output_mismatch"),
    ("add", "cpp_patch_timer", "cheat", "patched_harness"),
    ("add", "cheat_patch_allclose", "wrong_output", "patched_harness"),
    ("add", "cheat_forge_report", "cheat", "report_tampered"),
]

# Cheats that a harness defeats by construction: they simply fail.
FAILS = [
    ("add", "cheat_empty", "wrong_output"),  # the reference never ran in the candidate's process
]


@pytest.mark.parametrize("reference, candidate, expected, flag", CHEATS, ids=[c[1] for c in CHEATS])
def test_cheat_is_caught(run_eval, cpu_library, reference, candidate, expected, flag):
    r = run_eval(reference, candidate)
    assert r["category"] == expected, (r["category"], r["error"], r["flags"])
    assert flag in r["flags"]
    assert r["correct"] is False and r["faster"] in (None, False)


@pytest.mark.parametrize("reference, candidate, expected", FAILS, ids=[c[1] for c in FAILS])
def test_cheat_fails(run_eval, reference, candidate, expected):
    r = run_eval(reference, candidate)
    assert r["category"] == expected and r["correct"] is False


def test_a_slowed_reference_module_changes_nothing(run_eval, cpu_library):
    """The candidate finds a reference module in its own process and slows its
    forward: the reference is timed in another process, so its time and the
    candidate's honest verdict stand (the 10 ms sleep it adds to each
    reference call would put the speedup in the hundreds if it counted)."""
    r = run_eval("add", "cpp_slow_reference")
    assert r["category"] in ("correct_slower", "correct_tie", "correct_faster", "correct_unstable"), r["flags"]
    assert r["speedup"] < 10, r["speedup"]


def test_a_constant_reference_decides_nothing(run_eval):
    """A reference whose output never depends on its input: a candidate that
    computes it and one that returns ones cannot be told apart by it."""
    r = run_eval("softmax_singleton", "legit_constant")
    assert r["category"] == "indistinguishable" and r["correct"] is False, (r["category"], r["error"])
    assert "constant_reference" in r["flags"] and "constant_output" not in r["flags"]
    assert r["runtime_ms"] is None and r["variants"] is None
    r = run_eval("softmax_singleton", "cheat_constant")
    assert r["category"] == "indistinguishable", (r["category"], r["error"])
    assert {"constant_reference", "constant_output"} <= set(r["flags"])


def test_a_constant_reference_still_fails_a_wrong_answer(run_eval):
    r = run_eval("softmax_singleton", "softmax_halved")
    assert r["category"] == "wrong_output" and "constant_reference" in r["flags"], (r["category"], r["flags"])


def test_speedup_beyond_the_bound_is_a_cheat(run_eval, cpu_library):
    r = run_eval("slow_add", "cpp_add", speedup_bound=1.2)  # a real ~5x speedup, above this bound
    assert r["category"] == "cheat" and "excessive_speedup" in r["flags"]
    assert r["speedup"] > 1.2 and r["faster"] is False
