"""`kernelsweep final`: one record per (model, method, task, sample) cell: the
submitted candidate (chosen by the evaluator, never by the model) and the cost
of getting there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kernelsweep.core.fileio import read_json, write_json
from kernelsweep.study.layout import EVAL, RESPONSE, Key, cand_dir, key_of
from kernelsweep.models.records import call_usage
from kernelsweep.tasks.ids import parse_task_id
from kernelsweep.core.verdict import CATEGORIES


def finalize(cell: Key, selection: dict[str, Any], responses: list[dict[str, Any]],
             evals: list[dict[str, Any]], roles: list[dict[str, Any]]) -> dict[str, Any]:
    used = call_usage(responses + roles)
    evaluated = [e for e in evals if e.get("category") in CATEGORIES]
    best = selection.get("best")
    return {
        "schema": "kernelsweep/final/1",
        "model": cell.model,
        "method": cell.method,
        "task": cell.task,
        "level": parse_task_id(cell.task)[0],
        "sample": cell.sample,
        "precision": cell.precision,
        "status": "evaluated" if best else "no_candidate",
        "best": {"turn": best["turn"], "cand": best["cand"]} if best else None,
        "result": selection.get("best_eval"),
        "turns_run": len({e["cell"]["turn"] for e in evals if e.get("category") != "stopped" and "cell" in e}),
        "candidates_evaluated": len(evaluated),
        "generation_failures": sum(1 for r in responses if r.get("status") == "failed"),
        "llm_calls": len(used.calls),
        "tokens": {"prompt": used.prompt_tokens, "completion": used.completion_tokens},
        "generation_s": round(used.seconds, 3),
        "evaluation_s": round(sum(float(e.get("wall_s") or 0.0) for e in evals), 3),
        "stop_reason": selection.get("stop_reason"),
    }


def configure(parser) -> None:
    parser.add_argument("--selection", required=True, help="the last turn's select.json")
    parser.add_argument("--turns", type=int, required=True, help="the method's turns")
    parser.add_argument("--cands", type=int, required=True, help="candidates per turn (the method's n)")
    parser.add_argument("--roles", nargs="*", default=[], help="analyzer / researcher / feedback response.json files")
    parser.add_argument("--out", required=True, help="the cell's final.json (its path names the cell)")


def main(args) -> int:
    # Every candidate's files, found from the cell's layout: the workflow names only the last
    # selection (which comes after all of them) as the rule's input.
    cell_dir = Path(args.out).parent
    folders = [cand_dir(cell_dir, t, c) for t in range(args.turns) for c in range(args.cands)]
    record = finalize(
        key_of(args.out),
        read_json(args.selection),
        [read_json(folder / RESPONSE) for folder in folders],
        [read_json(folder / EVAL) for folder in folders],
        [read_json(p) for p in args.roles],
    )
    write_json(args.out, record)
    print(f"{args.out}: status={record['status']} category={record['result'] and record['result']['category']}")
    return 0
