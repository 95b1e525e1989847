"""`kernelsweep final`: one record per (model, method, task, sample) cell: the
submitted candidate (chosen by the evaluator, never by the model) and the cost
of getting there."""

from __future__ import annotations

from typing import Any

from kernelsweep.fileio import read_json, write_json
from kernelsweep.models.records import model_calls, token_usage
from kernelsweep.verdict import CATEGORIES


def _usage(records: list[dict[str, Any]]) -> tuple[int, int, int, float]:
    """LLM calls made, prompt and completion tokens, seconds."""
    calls = model_calls(records)
    tokens = [token_usage(r) for r in calls]
    return (len(calls), sum(p or 0 for p, _ in tokens), sum(c or 0 for _, c in tokens),
            sum(float(r.get("latency_s") or 0.0) for r in calls))


def finalize(cell: str, selection: dict[str, Any], responses: list[dict[str, Any]],
             evals: list[dict[str, Any]], roles: list[dict[str, Any]]) -> dict[str, Any]:
    model, method, task, sample = cell.split("/")
    calls, prompt_tokens, completion_tokens, generation_s = _usage(responses + roles)
    evaluated = [e for e in evals if e.get("category") in CATEGORIES]
    best = selection.get("best")
    return {
        "schema": "kernelsweep/final/1",
        "model": model,
        "method": method,
        "task": task,
        "level": int(task[1]) if task[1].isdigit() else None,
        "sample": int(sample),
        "status": "evaluated" if best else "no_candidate",
        "best": {"turn": best["turn"], "cand": best["cand"]} if best else None,
        "result": selection.get("best_eval"),
        "turns_run": len({e["cell"]["turn"] for e in evals if e.get("category") != "stopped" and "cell" in e}),
        "candidates_evaluated": len(evaluated),
        "generation_failures": sum(1 for r in responses if r.get("status") == "failed"),
        "llm_calls": calls,
        "tokens": {"prompt": prompt_tokens, "completion": completion_tokens},
        "generation_s": round(generation_s, 3),
        "evaluation_s": round(sum(float(e.get("wall_s") or 0.0) for e in evals), 3),
        "stop_reason": selection.get("stop_reason"),
    }


def configure(parser) -> None:
    parser.add_argument("--cell", required=True, help="model/method/task/sample")
    parser.add_argument("--selection", required=True, help="the last turn's select.json")
    parser.add_argument("--responses", nargs="*", default=[])
    parser.add_argument("--evals", nargs="*", default=[])
    parser.add_argument("--roles", nargs="*", default=[], help="analyzer / researcher / feedback response.json files")
    parser.add_argument("--out", required=True)


def main(args) -> int:
    record = finalize(
        args.cell,
        read_json(args.selection),
        [read_json(p) for p in args.responses],
        [read_json(p) for p in args.evals],
        [read_json(p) for p in args.roles],
    )
    write_json(args.out, record)
    print(f"{args.out}: status={record['status']} category={record['result'] and record['result']['category']}")
    return 0
