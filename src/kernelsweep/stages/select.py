"""The best candidate so far, monotone across turns (the turn's selection,
written by `kernelsweep evaluate-turn`).

The previous turn's best is considered first, so a tie keeps the earlier turn and
a later broken turn can never displace an earlier working one
(kernelsweep.core.verdict.selection_key is the one ordering)."""

from __future__ import annotations

from typing import Any

from kernelsweep.core.fileio import read_json
from kernelsweep.study.layout import key_of
from kernelsweep.core.verdict import CATEGORIES, SUCCESS_CATEGORIES, best_of

GOALS = {
    "correct": lambda r: r.get("category") in SUCCESS_CATEGORIES,
    "faster": lambda r: r.get("category") == "correct_faster",
    "none": lambda r: False,
}


def _turn_and_cand(eval_path: str) -> tuple[int, int]:
    key = key_of(eval_path)
    return key.turn, key.cand


def select(turn: int, eval_paths: list[str], previous: dict[str, Any] | None, goal: str, last: bool) -> dict[str, Any]:
    """The selection of a turn whose eval.json files are written."""
    return select_evaluated(turn, [(p, read_json(p)) for p in eval_paths], previous, goal, last)


def select_evaluated(turn: int, evaluated: list[tuple[str, dict[str, Any]]], previous: dict[str, Any] | None,
                     goal: str, last: bool) -> dict[str, Any]:
    """The selection from (eval.json path, its record) pairs, in candidate order."""
    # Records that are not evaluations (stopped turn, failed model call) take no part.
    contenders: list[tuple[dict[str, Any], dict[str, Any]]] = []
    if previous and previous.get("best"):
        contenders.append((previous["best"], previous["best_eval"]))
    for path, result in evaluated:
        if result.get("category") in CATEGORIES:
            t, c = _turn_and_cand(path)
            contenders.append(({"turn": t, "cand": c, "eval_path": path}, result))
    index = best_of([r for _, r in contenders])
    best, best_eval = (contenders[index] if index is not None else (None, None))

    this_turn = [(p, r) for p, r in evaluated if r.get("category") in CATEGORIES]
    turn_index = best_of([r for _, r in this_turn])
    turn_best = _turn_and_cand(this_turn[turn_index][0])[1] if turn_index is not None else None

    stopped_turn = all(r.get("category") == "stopped" for _, r in evaluated)
    if previous and previous.get("stop"):
        stop, reason = True, previous.get("stop_reason")
    elif best_eval is not None and GOALS[goal](best_eval):
        stop, reason = True, f"goal '{goal}' met at turn {best['turn']}"
    elif last:
        stop, reason = True, "last turn"
    else:
        stop, reason = False, None
    return {
        "schema": "kernelsweep/select/1",
        "turn": turn,
        "goal": goal,
        "best": best,
        "best_eval": best_eval,
        "turn_best": turn_best,
        "turn_stopped": stopped_turn,
        "last_eval": evaluated[-1][1] if evaluated else None,
        "stop": stop,
        "stop_reason": reason,
    }

