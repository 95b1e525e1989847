"""What crosses the trust boundary upward, declared once: the lines a worker
writes on its report pipe (each an envelope: a kind and its fields) and each
worker's replies to each command (the fields the parent reads from them).
The parent reads every worker's stream through `parse` (sandbox.Worker), and
every reply through `reply_violation`; the whole stream is capped at
settings.REPORT_CAP_BYTES and one message at settings.MESSAGE_CAP_BYTES
(sandbox.py). What breaks these rules is a protocol violation, the sending
worker's fault: from the candidate's worker, flag `report_tampered`, a cheat
(evaluation.py), since the harness's own frame never sends one; from the
reference's worker (which reads the candidate's output files), no reply, a
harness error (evaluation.py: `Evaluation.reference_ok`). Fields not
declared are carried, never read."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable

Check = Callable[[Any], bool]


def ANY(value: Any) -> bool:  # noqa: N802 - a check, named like the types beside it
    return True


def STR(value: Any) -> bool:  # noqa: N802
    return isinstance(value, str)


def BOOL(value: Any) -> bool:  # noqa: N802
    return isinstance(value, bool)


def INT(value: Any) -> bool:  # noqa: N802
    return type(value) is int


def NUMBER(value: Any) -> bool:  # noqa: N802 - NaN and infinities pass: the verdict judges them
    return type(value) in (int, float)


def OBJECT(value: Any) -> bool:  # noqa: N802
    return isinstance(value, dict)


def optional(check: Check) -> Check:
    return lambda value: value is None or check(value)


def list_of(check: Check) -> Check:
    return lambda value: isinstance(value, list) and all(check(x) for x in value)


@dataclass(frozen=True)
class Shape:
    """A message's declared fields: each required one present and passing
    its check; an optional one passing it when present."""
    required: dict[str, Check] = field(default_factory=dict)
    optional: dict[str, Check] = field(default_factory=dict)

    def violation(self, message: dict[str, Any]) -> str | None:
        for name, check in self.required.items():
            if name not in message:
                return f"no {name!r}"
            if not check(message[name]):
                return f"{name!r} is not of its declared type"
        for name, check in self.optional.items():
            if name in message and not check(message[name]):
                return f"{name!r} is not of its declared type"
        return None


@dataclass(frozen=True)
class OneOf:
    """A message of one of several shapes (a reply that is either a result
    or a declared refusal)."""
    shapes: tuple[Shape, ...]

    def violation(self, message: dict[str, Any]) -> str | None:
        whys = [shape.violation(message) for shape in self.shapes]
        return None if None in whys else " and ".join(f"({why})" for why in whys)


def shaped(shape: Shape | OneOf) -> Check:
    return lambda value: isinstance(value, dict) and shape.violation(value) is None


# The envelope of every line, by kind (untrusted/frame.py, untrusted/buildhooks.py send them).
ENVELOPES: dict[str, Shape] = {
    "phase": Shape({"phase": STR}),
    "hello": Shape({"prepared": ANY}),
    "reply": Shape({"seq": INT, "payload": OBJECT}),
    "result": Shape({"payload": OBJECT}),
    "build_start": Shape({"name": STR, "directory": STR}, {"key": STR}),
    "build_end": Shape({"name": STR, "ok": BOOL, "seconds": NUMBER}, {"cached": BOOL}),
}


def parse(line: bytes, nonce: str) -> dict[str, Any] | None:
    """The message on one report line, its nonce removed; None when the line
    is a violation: not UTF-8 JSON, not an object, not stamped with this
    run's nonce, of no declared kind, or with a declared field missing or of
    another type."""
    try:
        message = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(message, dict) or message.get("nonce") != nonce:
        return None
    shape = ENVELOPES.get(message.get("kind"))  # type: ignore[arg-type]
    if shape is None or shape.violation(message) is not None:
        return None
    return {k: v for k, v in message.items() if k != "nonce"}


# The candidate's replies with status "ok", by command ("setup": its reply to the
# configuration, seq 0): the fields the parent indexes, iterates or does arithmetic on.
# Fields it reads only as true or false are declared ANY (any JSON value will do).
_BUILDS = {"builds": list_of(shaped(Shape({"ok": ANY}, {"seconds": optional(NUMBER)}))),
           "compile_s": optional(NUMBER)}
_SIGNALS = {name: ANY for name in ("mutates_inputs", "aliases_inputs", "reuses_output_storage",
                                   "changed_after_return", "plain")}
_LAUNCH = Shape(optional={"share": optional(NUMBER)})
CANDIDATE_REPLIES: dict[str, Shape | OneOf] = {
    "setup": Shape(optional=_BUILDS),
    "construct": Shape(optional=_BUILDS),
    "trials": Shape({"trials": list_of(shaped(Shape({"name": STR, **_SIGNALS})))}, _BUILDS),
    "variant": OneOf((Shape(_SIGNALS, _BUILDS), Shape({"built_on_host": STR}, _BUILDS))),
    "clock": Shape(optional=_BUILDS),
    "warmup": Shape(optional=_BUILDS),
    "block": Shape({"ms": list_of(NUMBER), "plain": ANY}, _BUILDS),
    "save": Shape(optional=_BUILDS),
    "report": Shape(optional={"launch": optional(shaped(_LAUNCH)), "patched_harness": list_of(STR),
                              "patched_torch": list_of(STR), "settings_changed": list_of(STR), **_BUILDS}),
}


# The reference's replies with status "ok" (untrusted/reference.py; "setup": its manifest,
# or the candidate's process crowding it out of the device's memory).
_CASE = {"name": STR, "seed": INT, "mutates_inputs": BOOL, "output_bytes": INT}
_MANIFEST = Shape({"trials": list_of(shaped(Shape(_CASE))),
                   "probes": list_of(shaped(Shape({**_CASE, "inputs": STR}))),
                   "constant": BOOL, "degenerate": BOOL, "atol": NUMBER, "flush_bytes": INT, "input_bytes": INT,
                   "weights": OBJECT, "device_info": OBJECT},
                  {"rounding": optional(list_of(NUMBER)), "rounding_off": optional(STR), "rounding_trials": INT,
                   "handoff": shaped(Shape({"bytes": INT})), "handoff_off": STR, "handoff_partial": STR,
                   "output_slots": OBJECT, "seconds": OBJECT})
_CROWDED_OUT = Shape({"crowded_out": INT, "message": STR})
_COMPARISON = Shape({"ok": BOOL}, {"max_abs_diff": optional(NUMBER), "max_rel_diff": optional(NUMBER),
                                   "margin": optional(NUMBER), "kind": optional(STR), "message": optional(STR),
                                   "unreadable": STR, "tampered": BOOL, "same_as_first": BOOL})
_VARIANT = OneOf((Shape({"name": STR, "dropped": STR}, {"crowded_out": INT}),
                  Shape({"name": STR, "seed": INT, "constants": OBJECT},
                        {"rounding": optional(list_of(NUMBER)), "rounding_off": STR, "narrowed": STR,
                         "built_ahead": BOOL, "built_on_device": BOOL, "handoff": shaped(Shape({"bytes": INT})),
                         "slots": list_of(ANY)})))
REFERENCE_REPLIES: dict[str, Shape | OneOf] = {
    "setup": OneOf((_MANIFEST, _CROWDED_OUT)),
    "judge": Shape({"results": list_of(shaped(_COMPARISON))}, {"seconds": OBJECT}),
    "variant": Shape({"variant": shaped(_VARIANT)}),
    "warmup": Shape(),
    "block": Shape({"ms": list_of(NUMBER)}),
    "outputs": Shape(),
}


def reply_violation(replies: dict[str, Shape | OneOf], command: str | None, payload: dict[str, Any]) -> str | None:
    """Why a reply breaks the protocol, or None. Only an "ok" reply is
    shaped here; a failure's reply is read by classify.py. A reply to a
    command never sent, or to one without a declared reply, is a violation."""
    if payload.get("status") != "ok":
        return None
    shape = replies.get(command) if command is not None else None
    if shape is None:
        return f"a reply to {command!r}, which has no declared reply"
    why = shape.violation(payload)
    return None if why is None else f"its reply to {command!r}: {why}"
