"""The loop's state as a fold over trace records: the live loop and a resumed
one apply the same records in the same order, so they reach the same state
(messages to send, counters, submissions) without calling the model again."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kernelsweep.core.verdict import best_of, selection_key


@dataclass
class State:
    native: bool
    messages: list[dict[str, Any]] = field(default_factory=list)
    steps: int = 0                                   # model replies
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    elapsed_s: float = 0.0                           # active time: model calls and tools
    pending_calls: list[dict[str, Any]] = field(default_factory=list)
    attempts: list[dict[str, Any]] = field(default_factory=list)     # every evaluate / submit
    submissions: list[dict[str, Any]] = field(default_factory=list)
    mutations: list[dict[str, Any]] = field(default_factory=list)    # workspace writes, in order
    best_eval: dict[str, Any] | None = None
    error_counts: Counter = field(default_factory=Counter)
    failed_attempts: int = 0
    profile_required: bool = False
    blocked_unrecorded: list[int] = field(default_factory=list)
    lock_recorded: set[int] = field(default_factory=set)
    guard_counts: Counter = field(default_factory=Counter)
    stop: str | None = None
    ended: str | None = None

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def best_submission(self, lock: bool) -> dict[str, Any] | None:
        """The cell's result: the best submission (earliest on ties) with the lock, else the last."""
        if not self.submissions:
            return None
        if not lock:
            return self.submissions[-1]
        return self.submissions[best_of([s["eval"] for s in self.submissions])]

    def observe(self, call_id: str, name: str, text: str) -> None:
        if self.native:
            self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            self.messages.append({"role": "user", "content": f"Observation ({name}):\n{text}"})

    def apply(self, record: dict[str, Any]) -> None:
        kind = record["kind"]
        self.elapsed_s += float(record.get("wall_s") or 0.0)
        if kind == "start":
            self.messages = [dict(m) for m in record["messages"]]
        elif kind == "model":
            self._model(record)
        elif kind == "tool":
            self._tool(record)
        elif kind == "guard":
            self._guard(record)
        elif kind == "end":
            self.ended = record["reason"]

    def _model(self, record: dict[str, Any]) -> None:
        self.steps += 1
        usage = record.get("usage") or {}
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.messages.append(record["assistant_message"])
        self.pending_calls = list(record.get("calls") or [])
        if not self.pending_calls:  # nothing to run: the protocol error is the observation
            self.messages.append({"role": "user", "content": record["observation"]})

    def _tool(self, record: dict[str, Any]) -> None:
        self.tool_calls += 1
        self.pending_calls = [c for c in self.pending_calls if c["id"] != record["call_id"]]
        self.observe(record["call_id"], record["name"], record["observation"])
        if record.get("mutation"):
            self.mutations.append(record["mutation"])
        if record.get("blocked_by") == "force_profile":
            self.blocked_unrecorded.append(record["seq"])
        if record.get("error_key"):
            self.error_counts[record["error_key"]] += 1
        data = record.get("data") or {}
        if data.get("eval") is not None:
            result = data["eval"]
            self.attempts.append({"seq": record["seq"], "eval": result})
            if selection_key(result) > selection_key(self.best_eval):
                self.best_eval, self.failed_attempts = result, 0
            else:
                self.failed_attempts += 1
            if record["name"] == "submit":
                self.submissions.append({"index": len(self.submissions) + 1, "seq": record["seq"],
                                         "step": record.get("step"), "eval": result,
                                         "folder": data.get("folder")})
        if record["name"] == "profile" and record.get("ok"):
            self.failed_attempts, self.profile_required = 0, False

    def _guard(self, record: dict[str, Any]) -> None:
        guard, action = record["guard"], record["action"]
        self.guard_counts[guard] += 1
        if record.get("message"):
            self.messages.append({"role": "user", "content": record["message"]})
        if guard == "force_profile" and action == "blocked":
            self.blocked_unrecorded = [s for s in self.blocked_unrecorded if s != record.get("tool_seq")]
        elif guard == "force_profile" and action == "engaged":
            self.profile_required = True
        elif guard == "repeat_error":
            self.error_counts[record["error_key"]] = 0
            if action == "stop":
                self.stop = "guard:repeat_error"
        elif guard == "regression_lock":
            self.lock_recorded.add(record["submission"])
        elif guard == "max_submissions":
            self.stop = "guard:max_submissions"
