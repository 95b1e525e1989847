"""The response record: what one model call left behind, and how records map
back to calls (the one rule both final.json and the report count by)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

RESPONSE_SCHEMA = "kernelsweep/response/1"


def model_calls(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One record per model call actually made: a stopped turn made none, and the
    records that share a call_id (n candidates of one batched request) are one call.
    A record without a call_id (older files) counts as its own call."""
    calls, seen = [], set()
    for record in records:
        if record.get("status") == "stopped":
            continue
        call_id = record.get("call_id")
        if call_id is not None:
            if call_id in seen:
                continue
            seen.add(call_id)
        calls.append(record)
    return calls


def token_usage(record: Mapping[str, Any]) -> tuple[int | None, int | None]:
    """(prompt, completion) tokens as the backend reported them; None where it did not."""
    usage = record.get("usage") or {}
    return usage.get("prompt_tokens"), usage.get("completion_tokens")
