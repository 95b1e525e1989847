"""Which failed records are outages (stale, redone) and which are results
(kept), and how the stale ones are found and moved aside."""

from __future__ import annotations

import json

import pytest

from kernelsweep.models.records import outage
from kernelsweep.study.stale import find, move_aside, retired, retired_path


def failed(message, type_="GenerationFailed"):
    return {"status": "failed", "error": {"type": type_, "message": message}}


# Messages as earlier versions wrote them (openai and transformers backends).
OUTAGES = [
    "POST http://127.0.0.1:8000/v1/chat/completions failed after 5 attempt(s): ConnectError: [Errno 111] "
    "Connection refused",
    "POST http://10.0.0.7:8000/v1/chat/completions failed after 5 attempt(s): HTTP 503: loading",
    "POST http://gpu-node:8000/v1/chat/completions failed after 5 attempt(s): ReadTimeout: timed out",
    "GET http://127.0.0.1:8000/v1/models failed after 5 attempt(s): RemoteProtocolError: Server disconnected",
    "http://127.0.0.1:8000/v1/chat/completions returned invalid JSON: '<html>'",
    "generate() failed on google/gemma-3-270m: OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "generate() failed on google/gemma-3-270m: RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. "
    "DefaultCPUAllocator: can't allocate memory: you tried to allocate 8589934592 bytes.",
    "generate() failed on google/gemma-3-270m: RuntimeError: CUDA error: an illegal memory access was encountered",
    "Connection refused",
    "",
]
RESULTS = [
    "http://127.0.0.1:8000/v1/chat/completions refused the request: HTTP 400: prompt is longer than the context",
    "http://127.0.0.1:8000/v1/completions refused the request: HTTP 422: max_tokens must be positive",
    "generate() failed on google/gemma-3-270m: ValueError: Input length of input_ids is 9000",
]


@pytest.mark.parametrize("message", OUTAGES)
def test_unanswered_calls_are_outages(message):
    assert outage(failed(message)) is not None


@pytest.mark.parametrize("message", RESULTS)
def test_answered_refusals_are_results(message):
    assert outage(failed(message)) is None


def test_new_infrastructure_records_and_other_statuses():
    assert outage(failed("anything", "InfrastructureFailure")) is not None
    assert outage({"status": "ok", "error": None}) is None
    assert outage({"status": "stopped", "error": None}) is None
    assert outage({"status": "failed", "error": None}) is not None  # no cause recorded: redo it


def write(path, record):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=2))


def test_find_names_only_outages_and_move_aside_keeps_their_path(tmp_path):
    runs = tmp_path / "runs" / "m" / "zero_shot" / "L1-001" / "s0"
    stale = runs / "t0" / "c1" / "response.json"
    write(runs / "t0" / "c0" / "response.json", {"status": "ok", "raw_text": "the word failed in text: \"failed\""})
    write(stale, failed(OUTAGES[0]))
    write(runs / "t1" / "c0" / "response.json", failed(RESULTS[0]))
    write(runs / "roles" / "analyzer" / "response.json", failed(OUTAGES[1]))
    (runs / "t2" / "c0").mkdir(parents=True)
    (runs / "t2" / "c0" / "response.json").write_text('{"status": "failed", ')  # half a file: not judged here

    assert [p for p, _ in find(tmp_path)] == [runs / "roles/analyzer/response.json", stale]
    assert stale.exists() and retired(tmp_path) == set()  # finding moves nothing

    kept = move_aside(tmp_path, stale)
    assert not stale.exists() and kept == tmp_path / "stale" / stale.relative_to(tmp_path) == retired_path(tmp_path, stale)
    assert json.loads(kept.read_text())["error"]["message"] == OUTAGES[0]
    assert retired(tmp_path) == {stale}  # the moved record, named by the path it had
    assert [p for p, _ in find(tmp_path)] == [runs / "roles/analyzer/response.json"]


def test_no_results_yet(tmp_path):
    assert find(tmp_path / "absent") == [] and retired(tmp_path / "absent") == set()


def test_evaluate_stage_refuses_an_outage_record(tmp_path):
    """Defence in depth: an outage record that reached the evaluate stage fails the job, no verdict."""
    import subprocess
    import sys

    c0 = tmp_path / "runs" / "m" / "zero_shot" / "L1-001" / "s0" / "t0" / "c0"
    write(c0 / "response.json", failed(OUTAGES[0]))
    (c0 / "candidate.py").write_text("")
    out = c0 / "eval.json"
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "evaluate-candidate", "--candidate",
                           str(c0 / "candidate.py"), "--response", str(c0 / "response.json"), "--reference",
                           str(tmp_path / "ref.py"), "--task", str(tmp_path / "task.json"), "--device", "cpu",
                           "--build-dir", str(tmp_path / "build"), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "records an outage, not the model's answer" in proc.stderr and "Connection refused" in proc.stderr
    assert not out.exists()
