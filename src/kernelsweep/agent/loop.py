"""The loop: resume from the trace, then call the model, run its tool calls,
apply the guards, until the trajectory ends. Every record is written before
its effect is used, so a kill at any point resumes without a second model
call for a recorded reply (a tool whose record was not written runs again)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from kernelsweep.core import react_trace as trace
from kernelsweep.agent import guards
from kernelsweep.agent.protocol import ToolCall
from kernelsweep.agent.state import State
from kernelsweep.agent.tools import Toolbox
from kernelsweep.agent.workspace import Workspace
from kernelsweep.models import GenerationFailed
from kernelsweep.core.seeds import derive_seed
from kernelsweep.core.verdict import SUCCESS_CATEGORIES

GOALS = {"correct": lambda r: r.get("category") in SUCCESS_CATEGORIES,
         "faster": lambda r: r.get("category") == "correct_faster",
         "none": lambda r: False}


@dataclass
class Trajectory:
    trace_path: Path
    start: dict[str, Any]               # the start record (messages, flags, key, config hash)
    flags: dict[str, Any]               # the method's flags
    key: dict[str, Any]                 # model, method, task, sample
    params: dict[str, Any]              # sampling parameters of every reply
    workspace: Workspace
    reference_source: str
    toolbox: Toolbox
    model_factory: Callable[[], Any]    # -> AgentModel, made at the first call (a finished trace needs none)


def _limit_reached(state: State, flags: dict[str, Any]) -> str | None:
    if state.steps >= int(flags["max_steps"]):
        return "limit:max_steps"
    if flags.get("max_total_tokens") and state.tokens >= int(flags["max_total_tokens"]):
        return "limit:max_total_tokens"
    if flags.get("wall_s") and state.elapsed_s >= float(flags["wall_s"]):
        return "limit:wall_s"
    return None


def _goal_met(state: State, flags: dict[str, Any]) -> str | None:
    goal = flags.get("goal", "faster")
    met = next((s for s in state.submissions if GOALS[goal](s["eval"])), None)
    return f"goal:{goal}" if met else None


def run(t: Trajectory) -> tuple[State, list[dict[str, Any]]]:
    records = trace.load(t.trace_path)
    writer = trace.TraceWriter(t.trace_path, records)
    state = State(native=bool(t.start["native"]))
    for record in records:
        state.apply(record)
    # The workspace is rebuilt from the recorded writes (files a script made are not kept).
    t.workspace.reset(t.reference_source)
    for mutation in state.mutations:
        t.workspace.write(mutation["path"], mutation["content"])
    if records:
        print(f"react: resuming {t.trace_path} at step {state.steps} ({len(records)} records)", file=sys.stderr)
    else:
        records.append(writer.append(t.start))
        state.apply(records[-1])

    def record(fields: dict[str, Any]) -> dict[str, Any]:
        rec = writer.append(fields)
        state.apply(rec)
        records.append(rec)
        return rec

    model = None
    try:
        while state.ended is None:
            # Tool and guard records carry the step of the reply they follow.
            for event in guards.pending(state, t.flags):
                record({"kind": "guard", "step": max(state.steps - 1, 0), **event})
            reason = state.stop or _goal_met(state, t.flags)
            if reason is None and state.pending_calls:
                call = state.pending_calls[0]
                record({"kind": "tool", "step": state.steps - 1,
                        **t.toolbox.call(ToolCall(call["name"], call["args"], call["id"]), state)})
                continue
            reason = reason or _limit_reached(state, t.flags)
            if reason:
                record({"kind": "end", "reason": reason})
                break
            if model is None:
                model = t.model_factory()
            step = state.steps
            seed = derive_seed(t.key["model"], t.key["method"], t.key["task"], t.key["sample"], step, 0, "agent")
            started = time.monotonic()
            try:
                reply = model.reply(state.messages, step, params=t.params, seed=seed,
                                    key={**t.key, "turn": step, "role": "agent"})
            except GenerationFailed as e:
                record({"kind": "end", "reason": "model_failed", "error": str(e)})
                break
            record({"kind": "model", "step": step, "model": model.backend.describe(),
                    "wall_s": round(time.monotonic() - started, 3), **reply})
    finally:
        if model is not None:
            model.close()
    return state, records
