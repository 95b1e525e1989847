"""The response record: what one model call left behind, and how records map
back to calls (the one rule both final.json and the report count by)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
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


@dataclass(frozen=True)
class CallUsage:
    calls: list[Mapping[str, Any]]  # one record per call made (model_calls)
    prompt_tokens: int  # a missing count adds 0: a lower bound
    completion_tokens: int
    seconds: float  # summed latency


def call_usage(records: Iterable[Mapping[str, Any]]) -> CallUsage:
    """The calls behind some response records and what they used: final.json's
    tallies and the report's columns, so the two cannot count differently."""
    calls = model_calls(records)
    tokens = [token_usage(r) for r in calls]
    return CallUsage(calls=calls, prompt_tokens=sum(p or 0 for p, _ in tokens),
                     completion_tokens=sum(c or 0 for _, c in tokens),
                     seconds=sum(float(r.get("latency_s") or 0.0) for r in calls))


# A device that failed generation (out of memory, a lost or faulted GPU), by
# the exception's type name or the CPU allocator's message: never the model's
# outcome. The transformers backend raises InfrastructureFailure on it; records
# that hold it are outages.
MACHINE_FAULT = re.compile(r"OutOfMemoryError|AcceleratorError|MemoryError|can't allocate memory|"
                           r"CUDA out of memory|CUDA error")

# The only failed calls that are results: the server answered and refused this
# request (a 4xx other than 408/429, e.g. a prompt longer than the context), or
# in-process generation raised an error of the request, not of the device.
# Records carry no structured cause beyond the message (older ones are all typed
# GenerationFailed), so any other failed record is taken for an outage: redoing
# a real refusal costs one call and gives it again, keeping an outage is a
# wrong number in the study.
_ANSWERED = re.compile(r"refused the request: HTTP 4(?!08|29)\d\d|^generate\(\) failed on ")


def outage(record: Mapping[str, Any]) -> str | None:
    """Why this record holds an outage rather than a result (None: it is a
    result). Such records were written before outages failed the job; they are
    stale and must be redone (kernelsweep.study.stale)."""
    if record.get("status") != "failed":
        return None
    error = record.get("error")
    message = str((error.get("message") if isinstance(error, dict) else error) or "")
    if _ANSWERED.search(message) and not MACHINE_FAULT.search(message):
        return None
    return message or "a failed call without a recorded cause"
