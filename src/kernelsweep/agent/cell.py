"""`kernelsweep react`: one (model, method, task, sample) cell of the react strategy.

    kernelsweep react --spec SPEC.json --task TASK.json --reference TASK.py --cell-dir DIR --out DIR/final.json

Files of the cell (docs/react.md):
    react/trace.jsonl          every step, written as it happens (resume reads it)
    react/workspace/           the agent's folder (rebuilt from the trace on resume)
    react/attempts/aNNN/       each evaluate/submit: candidate.py, eval.json, logs
    react/calls/stepNNN.json   each model call as a response record (the report counts calls and tokens)
    react/trace.html           the trajectory, readable in a browser
    t0/c0/candidate.py, eval.json   the cell's result: the chosen submission
    final.json                 as for every strategy (kernelsweep/final/1), plus `react`

A finished trace is never rerun: the outputs are written again from it. A
trace started under another configuration is discarded (a different experiment)."""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from kernelsweep.study import layout
from kernelsweep.core import react_trace as trace
from kernelsweep.agent import protocol
from kernelsweep.agent.loop import Trajectory, run
from kernelsweep.agent.model import AgentModel, uses_native
from kernelsweep.agent.state import State
from kernelsweep.agent.tools import Context, Toolbox
from kernelsweep.agent.workspace import Workspace
from kernelsweep.core.fileio import dumps, read_json, sha256_text, write_atomic, write_json
from kernelsweep.models import ModelSetupError
from kernelsweep.models.records import RESPONSE_SCHEMA
from kernelsweep.prompting.strategies import KERNEL_LANGUAGE, sampling_params
from kernelsweep.prompting.templates import device_note, example_candidate, render

# Spec keys that change what a trajectory is; where it runs (slots, build cache) does not.
TRAJECTORY_KEYS = ("model", "model_spec", "method", "method_flags", "task", "sample", "device", "precision",
                   "evaluation", "corpus")


def configure(parser) -> None:
    parser.add_argument("--spec", required=True, help="the cell's spec as JSON (written by workflow/rules/react.smk)")
    parser.add_argument("--task", required=True, help="tasks/{task}.json")
    parser.add_argument("--reference", required=True, help="tasks/{task}.py (read by the evaluator, never shown raw)")
    parser.add_argument("--cell-dir", required=True)
    parser.add_argument("--out", required=True, help="final.json")


def start_record(spec: dict[str, Any], task: dict[str, Any], native: bool, allowed: list[str]) -> dict[str, Any]:
    device = spec["device"]
    manual = render("react_native_protocol.md") if native else render("react_text_protocol.md")
    system = render("react_system.md", kernel_language=KERNEL_LANGUAGE[device],
                    tools=protocol.text_manual(allowed), protocol=manual)
    user = render("react_task.md", reference=task["code"].strip(), device_note=device_note(device, spec["precision"]),
                  example=example_candidate(device))
    identity = {k: spec[k] for k in TRAJECTORY_KEYS}
    return {"kind": "start", "schema": trace.SCHEMA, "config_sha256": sha256_text(dumps(identity)),
            "key": {k: spec[k] for k in ("model", "method", "task", "sample")}, "native": native,
            "tools": allowed, "flags": spec["method_flags"], "task_sha256": task["sha256"],
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}


def _discard_stale(react_dir: Path, cell_dir: Path, config_sha: str) -> None:
    trace_path = cell_dir / layout.REACT_TRACE
    records = trace.load(trace_path) if trace_path.exists() else []
    if records and records[0].get("config_sha256") != config_sha:
        print(f"react: {react_dir} was recorded under another configuration; starting afresh", file=sys.stderr)
        shutil.rmtree(react_dir)
        shutil.rmtree(layout.turn_dir(cell_dir, 0), ignore_errors=True)


def call_records(records: list[dict[str, Any]], key: dict[str, Any], prompt_sha: str) -> list[dict[str, Any]]:
    """Each model reply as a response record (docs/results.md), for the report's call and token counts."""
    out = []
    for r in trace.of_kind(records, "model"):
        out.append({"schema": RESPONSE_SCHEMA, "status": "ok", "error": None, "role": "agent",
                    "key": {**key, "turn": r["step"], "role": "agent"}, "cand": 0, "model": r.get("model"),
                    "request": {"trace_seq": r["seq"], "params": {"seed": r.get("seed")}},
                    "raw_text": r.get("raw_text"), "reasoning": r.get("reasoning"),
                    "finish_reason": r.get("finish_reason"), "usage": r.get("usage"),
                    "latency_s": r.get("latency_s"), "seed": r.get("seed"), "batch": {"n": 1, "index": 0},
                    "extraction": None, "meta": r.get("meta") or {}, "prompt_sha256": prompt_sha,
                    "call_id": f"{prompt_sha[:16]}-{r['seq']}"})
    return out


def finalize(spec: dict[str, Any], state: State, records: list[dict[str, Any]], cell_dir: Path) -> dict[str, Any]:
    flags = spec["method_flags"]
    chosen = state.best_submission(lock=bool(flags.get("regression_lock")))
    result = None
    if chosen is not None:
        folder = Path(chosen["folder"])
        result = {**chosen["eval"], "cell": {**{k: spec[k] for k in ("model", "method", "task", "sample", "precision")},
                                            "turn": 0, "cand": 0},
                  "react": {"submission": chosen["index"], "step": chosen["step"], "attempt": folder.name}}
        chosen_dir = layout.cand_dir(cell_dir, 0, 0)
        write_atomic(chosen_dir / layout.CANDIDATE, (folder / layout.CANDIDATE).read_text(encoding="utf-8"))
        write_json(chosen_dir / layout.EVAL, result)
    tools = [r for r in records if r["kind"] == "tool"]
    models = [r for r in records if r["kind"] == "model"]
    end = next((r for r in records if r["kind"] == "end"), {})
    task = spec["task"]
    return {
        "schema": "kernelsweep/final/1",
        "model": spec["model"], "method": spec["method"], "task": task,
        "level": int(task[1]) if task[1].isdigit() else None, "sample": int(spec["sample"]),
        "precision": spec["precision"],
        "status": "evaluated" if result else "no_candidate",
        "best": {"turn": 0, "cand": 0} if result else None,
        "result": result,
        "turns_run": len(state.submissions),
        "candidates_evaluated": 1 if result else 0,
        "generation_failures": int(end.get("reason") == "model_failed"),
        "llm_calls": len(models),
        "tokens": {"prompt": state.prompt_tokens, "completion": state.completion_tokens},
        "generation_s": round(sum(float(r.get("latency_s") or 0) for r in models), 3),
        "evaluation_s": round(sum(float(r.get("wall_s") or 0) for r in tools if r["name"] in ("evaluate", "submit")), 3),
        "stop_reason": end.get("reason"),
        "react": {
            "steps": state.steps, "tool_calls": state.tool_calls, "submissions": len(state.submissions),
            "chosen_submission": chosen["index"] if chosen else None,
            "submission_categories": [s["eval"].get("category") for s in state.submissions],
            "evaluations": len(state.attempts),
            "tools_used": dict(Counter(r["name"] for r in tools)),
            "guards": dict(state.guard_counts),
            "native": bool(records[0]["native"]) if records else None,
            "trace": layout.REACT_TRACE,
        },
    }


def run_cell(spec: dict[str, Any], task_path: Path, reference: Path, cell_dir: Path, out: Path) -> dict[str, Any]:
    task = read_json(task_path)
    flags = spec["method_flags"]
    native = uses_native(flags.get("protocol", "auto"), spec["model_spec"], spec["model"])
    allowed = protocol.enabled_tools(flags)
    start = start_record(spec, task, native, allowed)
    react_dir = cell_dir / layout.REACT_DIR
    _discard_stale(react_dir, cell_dir, start["config_sha256"])
    evaluation = spec["evaluation"]
    ctx = Context(workspace=Workspace(react_dir / "workspace"), reference=reference.resolve(),
                  attempts_dir=react_dir / "attempts", device=spec["device"], precision=spec["precision"],
                  evaluation=evaluation, profile_timeout_s=float(spec.get("profile_timeout_s") or 300),
                  build_dir=Path(spec["build_dir"]), flags=flags, corpus=spec.get("corpus"),
                  slots=spec.get("slots") or {"results": str(cell_dir), "gpus": "cpu" if spec["device"] == "cpu" else "auto"},
                  task_sha256=task["sha256"])
    key = start["key"]
    params = sampling_params({"method": flags, "model": spec["model_spec"]}, "generator")
    trajectory = Trajectory(
        trace_path=cell_dir / layout.REACT_TRACE, start=start, flags=flags, key=key, params=params,
        workspace=ctx.workspace, reference_source=task["code"], toolbox=Toolbox(ctx),
        model_factory=lambda: AgentModel(spec["model"], spec["model_spec"], native, allowed))
    state, records = run(trajectory)

    prompt_sha = start["config_sha256"]
    calls_dir = react_dir / "calls"
    for rec in call_records(records, key, prompt_sha):
        write_json(calls_dir / f"step{rec['key']['turn']:03d}.json", rec)
    from kernelsweep.report.trajectory_page import render_html

    write_atomic(react_dir / "trace.html", render_html(records))
    final = finalize(spec, state, records, cell_dir)
    write_json(out, final)  # last: its presence means the cell is complete
    return final


def main(args) -> int:
    spec = json.loads(Path(args.spec).read_text() if not args.spec.lstrip().startswith("{") else args.spec)
    try:
        final = run_cell(spec, Path(args.task), Path(args.reference), Path(args.cell_dir), Path(args.out))
    except ModelSetupError as e:
        print(f"kernelsweep react: {e}", file=sys.stderr)
        return 1
    except trace.TraceError as e:
        print(f"kernelsweep react: {e} (delete the cell's react/ folder to start it again)", file=sys.stderr)
        return 1
    r = final["react"]
    print(f"{args.out}: {final['status']} stop={final['stop_reason']} steps={r['steps']} "
          f"submissions={r['submissions']} guards={r['guards']} "
          f"category={final['result'] and final['result']['category']}")
    return 0
