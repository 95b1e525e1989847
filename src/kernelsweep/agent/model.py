"""One model reply of a trajectory, through the study's backends.

Native tool calls (OpenAI-compatible chat servers: vLLM, SGLang, `transformers
serve`) send the tool schemas and read `tool_calls`; every other backend (the
embedded base model, replay) gets the text protocol. Either way the reply's
reasoning (<think>, `reasoning_content`) is recorded apart and not sent back."""

from __future__ import annotations

import time
from typing import Any

from kernelsweep.agent import protocol
from kernelsweep.models import load_backend
from kernelsweep.models.spec import normalise


def uses_native(protocol_flag: str, model_spec: dict[str, Any], name: str) -> bool:
    spec = normalise(name, model_spec)
    can = spec["backend"] == "openai" and spec.get("chat") is True
    if protocol_flag == "native" and not can:
        from kernelsweep.models import ModelSetupError

        raise ModelSetupError(f"model '{name}': protocol native needs an OpenAI-compatible chat backend "
                              "(backend: openai, chat: true)")
    return can if protocol_flag == "auto" else protocol_flag == "native"


class AgentModel:
    def __init__(self, name: str, spec: dict[str, Any], native: bool, allowed: list[str]):
        self.backend = load_backend(name, spec)
        self.native = native
        self.allowed = allowed

    def close(self) -> None:
        self.backend.close()

    def reply(self, messages: list[dict[str, Any]], step: int, *, params: dict[str, Any], seed: int,
              key: dict[str, Any]) -> dict[str, Any]:
        """The model record's fields for one reply (raises GenerationFailed / ModelSetupError)."""
        if self.native:
            return self._native(messages, step, params, seed)
        started = time.perf_counter()
        (completion,) = self.backend.generate(messages, n=1, temperature=params["temperature"], top_p=params["top_p"],
                                              max_tokens=params["max_tokens"], seed=seed, key=key)
        parsed = protocol.parse_text(completion.text, step, self.allowed)
        return self._record(parsed, completion.text, {"role": "assistant", "content": parsed.content},
                            {"prompt_tokens": completion.prompt_tokens,
                             "completion_tokens": completion.completion_tokens},
                            completion.latency_s if completion.latency_s is not None else time.perf_counter() - started,
                            completion.finish_reason, seed, completion.meta)

    def _native(self, messages, step, params, seed) -> dict[str, Any]:
        reply = self.backend.chat_tools(messages, protocol.native_schemas(self.allowed),
                                        temperature=params["temperature"], top_p=params["top_p"],
                                        max_tokens=params["max_tokens"], seed=seed)
        message = reply["message"]
        parsed = protocol.parse_native(message, step, self.allowed)
        # What goes back: the visible content and the tool calls, never the reasoning.
        sent_back: dict[str, Any] = {"role": "assistant", "content": parsed.content or None}
        if message.get("tool_calls"):
            sent_back["tool_calls"] = [{"id": c.id, "type": "function",
                                        "function": {"name": c.name,
                                                     "arguments": raw.get("function", {}).get("arguments") or "{}"}}
                                       for c, raw in zip(parsed.calls, message["tool_calls"])]
        usage = reply.get("usage") or {}
        return self._record(parsed, message.get("content") or "", sent_back,
                            {"prompt_tokens": usage.get("prompt_tokens"),
                             "completion_tokens": usage.get("completion_tokens")},
                            reply["latency_s"], reply.get("finish_reason"), seed,
                            {"response_id": reply.get("response_id"), "served_model": reply.get("served_model")})

    def _record(self, parsed, raw_text, sent_back, usage, latency, finish_reason, seed, meta) -> dict[str, Any]:
        record = {
            "raw_text": raw_text,
            "reasoning": parsed.reasoning,
            "assistant_message": sent_back,
            "calls": [c.to_dict() for c in parsed.calls],
            "protocol_error": parsed.error,
            "usage": usage,
            "latency_s": round(float(latency), 3),
            "finish_reason": finish_reason,
            "seed": seed,
            "meta": meta,
        }
        if not parsed.calls:
            reminder = "" if self.native else f"\nReply with one action. Tools:\n{protocol.text_manual(self.allowed)}"
            record["observation"] = f"Observation: no tool call could be read ({parsed.error}).{reminder}"
        return record
