"""The verdict is a pure function of typed evidence: every branch, from plain
data, with no worker, device or file (judge/verdict.py)."""

from __future__ import annotations

import pytest

from kernelsweep.evaluator import cheats
from kernelsweep.evaluator.judge import verdict
from kernelsweep.evaluator.judge.verdict import Mismatch, TimedEvidence, TrialsEvidence

LOG = "/logs/candidate.log"
CHEAT = next(n for n, f in cheats.FLAGS.items() if f.effect == cheats.CHEAT)
NOT_A_KERNEL = sorted(cheats.NOT_A_KERNEL_FLAGS)[0]
INFO = next(n for n, f in cheats.FLAGS.items() if f.effect == cheats.INFO)


def trials(**found) -> TrialsEvidence:
    return TrialsEvidence(**dict({"flags": (), "log": LOG}, **found))


def timed(**found) -> TimedEvidence:
    return TimedEvidence(**dict({"device": "cuda", "flags": (), "defines_kernel": True, "launched": True,
                                 "timing_verdict": "faster", "speedup_ci": (1.8, 2.2), "log": LOG}, **found))


@pytest.mark.parametrize("kind, category", [("structure", "shape_mismatch"), ("shape", "shape_mismatch"),
                                            ("dtype", "shape_mismatch"), ("values", "wrong_output"),
                                            (None, "wrong_output")])
def test_mismatch_category(kind, category):
    assert verdict.mismatch_category(kind) == category


def test_cheat_error_names_only_the_cheats():
    error = verdict.cheat_error([INFO, CHEAT, NOT_A_KERNEL], LOG)
    assert error == {"type": "Cheat", "message": f"detected: {CHEAT}", "log": LOG}


def test_passing_trials_go_on():
    assert verdict.trials_verdict(trials()) is None
    assert verdict.trials_verdict(trials(flags=(INFO, NOT_A_KERNEL))) is None


def test_missing_output():
    assert verdict.trials_verdict(trials(missing=2)) == (
        "runtime_error", {"type": "MissingOutput", "log": LOG, "message": "no output for trial 2"})


def test_tampered_output_file_is_a_cheat():
    assert verdict.trials_verdict(trials(flags=("output_file_tampered",), tampered=0)) == (
        "cheat", {"type": "Cheat", "message": "detected: output_file_tampered", "log": LOG})


def test_unreadable_output():
    category, error = verdict.trials_verdict(trials(unreadable=(1, "not a tensor")))
    assert category == "runtime_error"
    assert error == {"type": "UnreadableOutput", "log": LOG, "message": "trial 1 output cannot be read: not a tensor"}


@pytest.mark.parametrize("kind, category", [("shape", "shape_mismatch"), ("values", "wrong_output")])
def test_mismatch(kind, category):
    assert verdict.trials_verdict(trials(mismatch=Mismatch(3, kind, "max diff 1.0"))) == (
        category, {"type": "OutputMismatch", "log": LOG, "message": "trial 3: max diff 1.0"})


def test_a_mismatch_from_work_past_the_return_is_a_cheat():
    found = trials(flags=("output_changed_after_return",), mismatch=Mismatch(0, "values", "off"))
    assert verdict.trials_verdict(found)[0] == "cheat"


def test_a_mismatch_outranks_other_cheats():
    found = trials(flags=(CHEAT,), mismatch=Mismatch(0, "values", "off"))
    assert verdict.trials_verdict(found)[0] == "wrong_output"


def test_a_cheat_among_passing_trials():
    assert verdict.trials_verdict(trials(flags=(CHEAT,)))[0] == "cheat"


def test_a_constant_reference_is_indistinguishable():
    category, error = verdict.trials_verdict(trials(constant=True))
    assert category == "indistinguishable" and error["type"] == "ConstantReference"
    assert verdict.trials_verdict(trials(constant=True, flags=(CHEAT,)))[0] == "cheat"


@pytest.mark.parametrize("speed, category", [("faster", "correct_faster"), ("slower", "correct_slower"),
                                             ("tie", "correct_tie"), (None, "correct_tie")])
def test_a_custom_kernel_by_its_speed(speed, category):
    assert verdict.timed_verdict(timed(timing_verdict=speed)) == (category, None)


def test_a_cheat_after_timing():
    found = timed(flags=(CHEAT,))
    assert verdict.timed_verdict(found) == ("cheat", {"type": "Cheat", "message": f"detected: {CHEAT}", "log": LOG})


@pytest.mark.parametrize("change, says", [
    ({"defines_kernel": False}, "defines no"),
    ({"launched": False}, "did not run them"),
    ({"launched": False, "failed_builds": ("fused", "fused")}, "extension(s) fused did not build"),
    ({"flags": (NOT_A_KERNEL,), "share": 0.02}, "share of the work 0.02"),
    # a build that failed before one that ran: the flag is the reason, not the failure
    ({"flags": (NOT_A_KERNEL,), "share": 0.02, "failed_builds": ("first_try",)}, "share of the work 0.02"),
])
def test_not_a_custom_kernel_says_why(change, says):
    found = timed(**change)
    assert not verdict.is_custom_kernel(found)
    category, error = verdict.timed_verdict(found)
    assert category == "no_custom_kernel" and error["type"] == "NoCustomKernel" and error["log"] == LOG
    assert says in error["message"]


def test_informational_flags_leave_a_custom_kernel():
    assert verdict.is_custom_kernel(timed(flags=(INFO,)))


@pytest.mark.parametrize("ci, unstable", [
    ((0.8, 2.0), True),          # 2.5 wide around 1
    ((0.9, 1.7), False),         # under 2 wide
    ((1.6, 4.0), False),         # wide, but wholly beyond 1.5x faster
    ((0.1, 0.6), False),         # wide, but wholly beyond 1.5x slower
    (None, False), ((0.0, 3.0), False),
])
def test_unstable_on_the_cpu(ci, unstable):
    found = timed(device="cpu", speedup_ci=ci)
    assert verdict.is_unstable(found) is unstable
    assert not verdict.is_unstable(timed(device="cuda", speedup_ci=ci))
    if unstable:
        assert verdict.timed_verdict(found) == ("correct_unstable", None)
        assert verdict.timed_verdict(timed(device="cpu", speedup_ci=ci, launched=False))[0] == "no_custom_kernel"
        assert verdict.timed_verdict(timed(device="cpu", speedup_ci=ci, flags=(CHEAT,)))[0] == "cheat"
