"""The messages that cross the trust boundary upward (evaluator/messages.py):
each kind's declared fields, and the candidate's replies by command, checked
from plain data; what breaks them is a violation."""

from __future__ import annotations

import json

import pytest

from kernelsweep.evaluator import messages

NONCE = "n" * 32


def line(**fields) -> bytes:
    return json.dumps({"nonce": NONCE, **fields}).encode()


@pytest.mark.parametrize("fields", [
    {"kind": "phase", "phase": "trials", "t": 1.0},
    {"kind": "hello", "prepared": "ok"},
    {"kind": "hello", "prepared": None},
    {"kind": "reply", "seq": 3, "payload": {"status": "ok"}},
    {"kind": "result", "payload": {"status": "ok"}},
    {"kind": "build_start", "name": "ext", "key": "ab", "directory": "/b/ext"},
    {"kind": "build_end", "name": "ext", "ok": True, "seconds": 1.5, "cached": False},
    {"kind": "build_end", "name": "ext", "ok": False, "seconds": 0.0},
])
def test_the_harness_own_messages_pass_with_the_nonce_removed(fields):
    assert messages.parse(line(**fields), NONCE) == fields


@pytest.mark.parametrize("raw", [
    b"\xff\xfe", b"not json", b"[1, 2]",
    json.dumps({"kind": "phase", "phase": "x"}).encode(),                     # unstamped
    json.dumps({"nonce": "other", "kind": "phase", "phase": "x"}).encode(),   # another run's
    line(kind="gossip"),                                                       # no such kind
    line(kind="phase"),                                                        # a field missing
    line(kind="reply", seq="3", payload={}),                                   # seq not an integer
    line(kind="reply", seq=3, payload=[1]),                                    # payload not an object
    line(kind="build_end", name="ext", ok="yes", seconds=1.0),
    line(kind="build_end", name="ext", ok=True, seconds=True),
])
def test_a_line_that_breaks_the_envelope_is_a_violation(raw):
    assert messages.parse(raw, NONCE) is None


REPLIES = messages.CANDIDATE_REPLIES
SIGNALS = {"mutates_inputs": False, "aliases_inputs": False, "reuses_output_storage": False,
           "changed_after_return": False, "plain": True}


@pytest.mark.parametrize("command, payload", [
    ("setup", {"status": "ok", "builds": [{"name": "ext", "ok": True, "seconds": 2.0, "in_hold": False}],
               "compile_s": 2.0}),
    ("trials", {"status": "ok", "trials": [dict(SIGNALS, name="trial0", cpu_ms=None)]}),
    ("variant", dict(SIGNALS, status="ok")),
    ("block", {"status": "ok", "ms": [0.5, 0.25, float("nan")], "plain": True, "hooks": []}),
    ("report", {"status": "ok", "launch": None, "patched_harness": [], "settings_changed": ["tf32"]}),
    ("report", {"status": "ok", "launch": {"launched": True, "share": 0.9}}),
    ("save", {"status": "ok", "hooks": []}),
    ("block", {"status": "error", "error": {"type": "RuntimeError"}}),  # a failure: classify.py reads it
])
def test_well_formed_replies(command, payload):
    assert messages.reply_violation(REPLIES, command, payload) is None


@pytest.mark.parametrize("command, payload", [
    ("trials", {"status": "ok"}),
    ("trials", {"status": "ok", "trials": [{"name": "trial0"}]}),
    ("trials", {"status": "ok", "trials": [dict(SIGNALS, name=["x"])]}),
    ("variant", {"status": "ok", "plain": True}),
    ("block", {"status": "ok", "ms": ["1.0"], "plain": True}),
    ("block", {"status": "ok", "ms": 1.0, "plain": True}),
    ("report", {"status": "ok", "launch": {"share": "all"}}),
    ("report", {"status": "ok", "patched_torch": [["x"]]}),
    ("setup", {"status": "ok", "builds": [{"seconds": 1.0}]}),
    ("construct", {"status": "ok", "compile_s": "1"}),
    ("finish", {"status": "ok"}),   # a command that is never answered
    (None, {"status": "ok"}),       # a reply to a command never sent
])
def test_malformed_replies_are_violations(command, payload):
    assert messages.reply_violation(REPLIES, command, payload)
