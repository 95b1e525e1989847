"""The messages that cross the trust boundary upward (evaluator/messages.py):
each kind's declared fields, and each worker's replies by command, checked
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


CASE = {"name": "trial0", "seed": 7, "mutates_inputs": False, "aliases_inputs": False, "output_bytes": 64}
MANIFEST = {"status": "ok", "trials": [CASE], "probes": [], "constant": False, "near_zero": False,
            "degenerate": False, "atol": 1e-4, "device_info": {"device_name": "cpu"}, "flush_bytes": 0,
            "input_bytes": 128, "weights": {"w": [[4], "float32", "ab"]}, "rounding": None,
            "rounding_off": None, "seconds": {"keep": 0.0}, "output_slots": {"trial0": [None]}}
RESULT = {"ok": True, "kind": None, "message": None, "max_abs_diff": 0.0, "max_rel_diff": 0.0, "margin": 0.1}


@pytest.mark.parametrize("command, payload", [
    ("setup", MANIFEST),
    ("setup", dict(MANIFEST, handoff={"bytes": 4096}, rounding=[1e-7], constant=True,
                   probes=[dict(CASE, name="probe_nan", inputs="probe_nan_in.pt")])),
    ("setup", {"status": "ok", "crowded_out": 2**33, "message": "CUDA out of memory"}),
    ("judge", {"status": "ok", "results": [RESULT, {"ok": False, "unreadable": "EOFError", "tampered": False}],
               "seconds": {"load": 0.1}}),
    ("judge", {"status": "ok", "results": [dict(RESULT, ok=False, kind="values", max_abs_diff=float("inf"))]}),
    ("variant", {"status": "ok", "variant": {"name": "v0", "dropped": "too large"}}),
    ("variant", {"status": "ok", "variant": {"name": "v0", "seed": 3, "constants": {"N": 8}, "mutates_inputs": False,
                                              "narrowed": "groups"}}),
    ("block", {"status": "ok", "ms": [0.5, 0.25]}),
    ("warmup", {"status": "ok"}),
    ("outputs", {"status": "ok"}),
])
def test_the_reference_own_replies_pass(command, payload):
    assert messages.reply_violation(messages.REFERENCE_REPLIES, command, payload) is None


@pytest.mark.parametrize("command, payload", [
    ("setup", {"status": "ok"}),                                       # neither a manifest nor crowded out
    ("setup", dict(MANIFEST, trials=[dict(CASE, output_bytes="64")])),
    ("setup", dict(MANIFEST, atol="1e-4")),
    ("setup", dict(MANIFEST, handoff={"bytes": None})),
    ("judge", {"status": "ok", "results": [{"kind": "values"}]}),      # no verdict in a comparison
    ("judge", {"status": "ok", "results": [dict(RESULT, max_abs_diff="0")]}),
    ("variant", {"status": "ok", "variant": {"name": "v0"}}),          # neither run nor dropped
    ("block", {"status": "ok", "ms": [True]}),
    ("trials", {"status": "ok", "trials": []}),                        # the reference is never asked
])
def test_a_reference_reply_not_as_declared_is_a_violation(command, payload):
    assert messages.reply_violation(messages.REFERENCE_REPLIES, command, payload)
