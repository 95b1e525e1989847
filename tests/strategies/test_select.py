"""Turn selection is monotone: a later broken turn never displaces an earlier
working one, ties keep the earlier candidate, and the stop rule follows the goal."""

import json
from pathlib import Path

import pytest

from kernelsweep.study import layout
from kernelsweep.stages.select import select


def write_eval(root: Path, turn: int, cand: int, category: str, speedup=None, custom=True) -> str:
    correct = category in ("correct_faster", "correct_tie", "correct_slower", "no_custom_kernel")
    path = root / layout.CAND.format(precision="fp32", model="m", method="iterative", task="L1-001", sample=0, turn=turn, cand=cand) / layout.EVAL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"category": category, "correct": correct, "compiled": category not in ("no_code", "syntax_error", "compile_error"),
                                "custom_kernel": custom and correct and category != "no_custom_kernel", "speedup": speedup}))
    return str(path)


def test_later_broken_turn_never_displaces_working_one(tmp_path):
    t0 = select(0, [write_eval(tmp_path, 0, 0, "correct_slower", 0.8)], None, "faster", last=False)
    assert t0["best"]["turn"] == 0 and not t0["stop"]
    t1 = select(1, [write_eval(tmp_path, 1, 0, "compile_error")], t0, "faster", last=False)
    assert (t1["best"]["turn"], t1["best"]["cand"]) == (0, 0)
    assert t1["best_eval"]["category"] == "correct_slower"
    assert t1["turn_best"] == 0  # this turn's own best is recorded separately


def test_ties_keep_the_earlier_candidate(tmp_path):
    evals = [write_eval(tmp_path, 0, c, "correct_tie", 1.0) for c in range(3)]
    assert select(0, evals, None, "none", last=False)["best"]["cand"] == 0
    t1 = select(1, [write_eval(tmp_path, 1, 0, "correct_tie", 1.0)], select(0, evals, None, "none", False), "none", False)
    assert t1["best"]["turn"] == 0


@pytest.mark.parametrize(
    "categories, expected",
    [
        (["wrong_output", "correct_slower", "compile_error"], 1),
        (["no_custom_kernel", "correct_slower"], 1),  # a correct kernel beats correct plain PyTorch
        (["compile_error", "wrong_output"], 1),  # compiled beats not compiled
        (["cheat", "correct_slower"], 1),  # a cheat is never correct, whatever its speedup
    ],
)
def test_order_within_a_turn(tmp_path, categories, expected):
    evals = [write_eval(tmp_path, 0, c, cat, 50.0 if cat == "cheat" else 1.0) for c, cat in enumerate(categories)]
    assert select(0, evals, None, "none", last=False)["best"]["cand"] == expected


def test_higher_speedup_wins_among_correct(tmp_path):
    evals = [write_eval(tmp_path, 0, 0, "correct_slower", 0.9), write_eval(tmp_path, 0, 1, "correct_faster", 1.3)]
    result = select(0, evals, None, "faster", last=False)
    assert result["best"]["cand"] == 1
    assert result["stop"] and "goal 'faster'" in result["stop_reason"]


def test_goal_correct_stops_on_a_correct_kernel_only(tmp_path):
    plain = select(0, [write_eval(tmp_path, 0, 0, "no_custom_kernel", 1.0, custom=False)], None, "correct", last=False)
    assert not plain["stop"]
    kernel = select(1, [write_eval(tmp_path, 1, 0, "correct_slower", 0.7)], plain, "correct", last=False)
    assert kernel["stop"]


def test_stop_propagates_and_stopped_records_take_no_part(tmp_path):
    t0 = select(0, [write_eval(tmp_path, 0, 0, "correct_faster", 1.5)], None, "faster", last=False)
    t1 = select(1, [write_eval(tmp_path, 1, 0, "stopped")], t0, "faster", last=False)
    assert t1["stop"] and t1["turn_stopped"] and t1["best"]["turn"] == 0
    assert t1["turn_best"] is None


def test_nothing_evaluated_gives_no_best(tmp_path):
    result = select(0, [write_eval(tmp_path, 0, 0, "generation_failed")], None, "faster", last=True)
    assert result["best"] is None and result["stop"] and result["stop_reason"] == "last turn"
