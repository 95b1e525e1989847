"""`kernelsweep generate` as the pipeline runs it: a real subprocess per call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from model_helpers import MESSAGES, chat_reply

from kernelsweep.models.embedded import UPSTREAM_ID
from kernelsweep.core.seeds import derive_seed


def prompt_file(tmp_path: Path, *, role="generator", n=1, stopped=False, model="m", max_tokens=32, **key) -> Path:
    record = {"messages": MESSAGES, "role": role, "stopped": stopped, "sha256": "abc123",
              "params": {"n": n, "temperature": 0.0 if n == 1 else 0.7, "max_tokens": max_tokens},
              "key": {"model": model, "method": "zero_shot", "task": "L1-001", "sample": 0, "turn": 0, **key}}
    path = tmp_path / "prompt.json"
    path.write_text(json.dumps(record))
    return path


def generate(model_spec, prompt: Path, out_dir: Path, model="m") -> subprocess.CompletedProcess:
    spec = model_spec if isinstance(model_spec, str) else json.dumps(model_spec)
    return subprocess.run([sys.executable, "-m", "kernelsweep", "generate", "--model", model, "--model-spec", spec,
                           "--prompt", str(prompt), "--out-dir", str(out_dir)],
                          capture_output=True, text=True, timeout=600)


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_replayed_generator_writes_candidate_and_record(tmp_path, replay_dir):
    row = json.loads((replay_dir / "zero_shot.jsonl").read_text().splitlines()[0])
    out = tmp_path / "t0"
    proc = generate({"backend": "replay", "path": str(replay_dir)}, prompt_file(tmp_path, task=row["task"]), out)
    assert proc.returncode == 0, proc.stderr
    record = read(out / "c0" / "response.json")
    assert record["schema"] == "kernelsweep/response/1" and record["status"] == "ok" and record["error"] is None
    assert record["raw_text"] == row["raw_response"]
    assert (out / "c0" / "candidate.py").read_text() == row["extracted_code"] + "\n"
    assert record["extraction"]["method"] == "fenced_python" and record["extraction"]["blocks"] == 1
    assert record["model"]["backend"] == "replay" and record["model"]["revision"].startswith("sha256:")
    assert record["request"]["messages"] == MESSAGES
    seed = derive_seed("m", "zero_shot", row["task"], 0, 0, 0)
    assert record["request"]["params"] == {"temperature": 0.0, "top_p": 1.0, "max_tokens": 32, "n": 1, "seed": seed}
    assert record["prompt_sha256"] == "abc123" and record["key"]["role"] == "generator" and record["cand"] == 0


def test_stopped_turn_never_calls_the_model(tmp_path, refused_url):
    spec = {"backend": "openai", "base_url": refused_url, "model": "m"}
    proc = generate(spec, prompt_file(tmp_path, n=2, stopped=True), tmp_path / "t1")
    assert proc.returncode == 0, proc.stderr
    for i in range(2):
        record = read(tmp_path / "t1" / f"c{i}" / "response.json")
        assert record["status"] == "stopped" and record["raw_text"] is None and record["cand"] == i
        assert (tmp_path / "t1" / f"c{i}" / "candidate.py").read_text() == ""


def test_unanswered_call_writes_nothing_and_fails(tmp_path, refused_url):
    spec = {"backend": "openai", "base_url": refused_url, "model": "m", "max_retries": 1, "backoff_s": 0.01,
            "wait_s": 0}
    proc = generate(spec, prompt_file(tmp_path, n=2), tmp_path / "t0")
    assert proc.returncode == 3, proc.stderr
    assert "outage, not a result" in proc.stderr and f"no answer from the server at {refused_url}" in proc.stderr
    assert "after 2 attempt(s)" in proc.stderr and "ConnectError" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not [p for p in (tmp_path / "t0").rglob("*") if p.is_file()]  # no record: the next run retries


def test_refused_request_is_recorded_as_the_models_outcome(tmp_path, scripted_server):
    from kernelsweep.models.records import outage

    server = scripted_server((400, {"error": {"message": "prompt is longer than the context"}}))
    proc = generate({"backend": "openai", "base_url": server.url, "model": "m"}, prompt_file(tmp_path, n=2),
                    tmp_path / "t0")
    assert proc.returncode == 0, proc.stderr
    assert "recorded as failed" in proc.stderr
    for i in range(2):
        record = read(tmp_path / "t0" / f"c{i}" / "response.json")
        assert record["status"] == "failed" and record["error"]["type"] == "GenerationFailed"
        assert "HTTP 400: prompt is longer" in record["error"]["message"]
        assert outage(record) is None  # a result: never retired as stale
        assert record["extraction"] is None and record["model"]["model_id"] == "m"
        assert (tmp_path / "t0" / f"c{i}" / "candidate.py").read_text() == ""


def test_prose_answer_is_a_no_code_candidate(tmp_path, scripted_server):
    server = scripted_server(chat_reply("I would fuse the two loops, but I will not write code."))
    proc = generate({"backend": "openai", "base_url": server.url, "model": "m"}, prompt_file(tmp_path), tmp_path / "t0")
    assert proc.returncode == 0, proc.stderr
    record = read(tmp_path / "t0" / "c0" / "response.json")
    assert record["status"] == "ok" and record["extraction"]["method"] == "none" and record["extraction"]["code"] is None
    assert (tmp_path / "t0" / "c0" / "candidate.py").read_text() == ""
    assert record["usage"] == {"prompt_tokens": 11, "completion_tokens": 7} and record["latency_s"] > 0


def test_other_roles_write_one_response(tmp_path, scripted_server):
    server = scripted_server(chat_reply("The reduction is memory bound."))
    out = tmp_path / "roles" / "analyzer"
    proc = generate({"backend": "openai", "base_url": server.url, "model": "m"},
                    prompt_file(tmp_path, role="analyzer"), out)
    assert proc.returncode == 0, proc.stderr
    record = read(out / "response.json")
    assert record["role"] == "analyzer" and record["raw_text"] == "The reduction is memory bound."
    assert record["extraction"] is None and not (out / "c0").exists()
    assert server.posts()[0]["body"]["seed"] == derive_seed("m", "zero_shot", "L1-001", 0, 0, 0, role="analyzer")


def test_missing_replay_record_stops_with_the_key(tmp_path, replay_dir):
    proc = generate({"backend": "replay", "path": str(replay_dir)}, prompt_file(tmp_path, turn=7), tmp_path / "t7")
    assert proc.returncode == 1
    assert "no recorded response" in proc.stderr and "turn=7" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "t7").exists()


@pytest.mark.parametrize("case, message", [
    ("no_prompt", "cannot read the prompt"),
    ("bad_spec_json", "--model-spec is not valid JSON"),
    ("bad_role", "role must be one of"),
    ("other_model", "is a prompt for model 'other'"),
    ("analyzer_n2", "role analyzer takes one response"),
    ("bad_backend", "backend must be one of"),
])
def test_bad_invocations_explain_themselves(tmp_path, case, message):
    spec = {"backend": "replay", "path": str(tmp_path)}
    prompt = prompt_file(tmp_path)
    if case == "no_prompt":
        prompt = tmp_path / "absent.json"
    elif case == "bad_spec_json":
        spec = "{not json"
    elif case == "bad_role":
        prompt = prompt_file(tmp_path, role="critic")
    elif case == "other_model":
        prompt = prompt_file(tmp_path, model="other")
    elif case == "analyzer_n2":
        prompt = prompt_file(tmp_path, role="analyzer", n=2)
    elif case == "bad_backend":
        spec = {"backend": "vllm"}
    proc = generate(spec, prompt, tmp_path / "out")
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.slow
def test_embedded_model_through_the_stage(tmp_path, embedded_checkpoint):
    """The real embedded model, two sampled candidates from one batched call."""
    spec = {"backend": "transformers", "path": str(embedded_checkpoint), "max_tokens": 64}
    prompt = prompt_file(tmp_path, n=2, max_tokens=8)  # the prompt's (a method's) cap wins over the model's
    proc = generate(spec, prompt, tmp_path / "t0")
    assert proc.returncode == 0, proc.stderr
    records = [read(tmp_path / "t0" / f"c{i}" / "response.json") for i in range(2)]
    seed = derive_seed("m", "zero_shot", "L1-001", 0, 0, 0)
    for i, record in enumerate(records):
        assert record["status"] == "ok" and record["seed"] == seed and record["batch"] == {"n": 2, "index": i}
        assert record["request"]["prompt"].startswith("### Instructions\n")  # a base model: plain prompt
        assert record["usage"]["completion_tokens"] <= 8 and record["usage"]["prompt_tokens"] > 5
        assert record["model"]["revision"].startswith("sha256:") and record["meta"]["batch"]["rows"] == 2
        assert record["model"]["model_id"] == UPSTREAM_ID  # the prepared checkpoint names its origin
        assert record["finish_reason"] in ("stop", "length")
    # The same call again (a rerun of the cell) reproduces the same text.
    proc = generate(spec, prompt, tmp_path / "again")
    assert proc.returncode == 0, proc.stderr
    assert [read(tmp_path / "again" / f"c{i}" / "response.json")["raw_text"] for i in range(2)] == \
        [r["raw_text"] for r in records]
