"""`kernelsweep check` before a run: a server that answers passes, one that is
down fails at once with the fix in the message, and an unwritable results
folder is named."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

SERVER = Path(__file__).with_name("loopback_model.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def live_url(tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(port), "--state", str(tmp_path / "state")])
    deadline = time.monotonic() + 60
    while not (tmp_path / "state" / "ready").exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
    assert (tmp_path / "state" / "ready").exists(), "the loopback server did not start"
    yield f"http://127.0.0.1:{port}/v1"
    proc.kill()
    proc.wait(timeout=30)


def check(tmp_path: Path, models: dict, results: str = "results") -> subprocess.CompletedProcess:
    config = {"results": results, "device": "cpu", "tasks": {"source": "demo", "levels": [0], "ids": [1]},
              "models": models, "methods": {"zero_shot": {"strategy": "zero_shot"}}}
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return subprocess.run([sys.executable, "-m", "kernelsweep", "check", "--configfile", str(path),
                           "--directory", str(tmp_path)], capture_output=True, text=True, timeout=120)


def test_answering_server_passes(tmp_path, live_url):
    proc = check(tmp_path, {"up": {"backend": "openai", "base_url": live_url, "model": "loopback"}})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"ok   model up: {live_url} answers" in proc.stdout
    assert "ok   results:" in proc.stdout and (tmp_path / "results").is_dir()


def test_down_server_fails_at_once_with_the_fix(tmp_path, live_url):
    down = f"http://127.0.0.1:{free_port()}/v1"
    start = time.monotonic()
    proc = check(tmp_path, {
        "up": {"backend": "openai", "base_url": live_url, "model": "loopback"},
        # wait_s is for the run; the check does not wait
        "down": {"backend": "openai", "base_url": down, "model": "loopback", "wait_s": 600},
        "wrong": {"backend": "openai", "base_url": live_url, "model": "other"},
    })
    assert time.monotonic() - start < 60
    assert proc.returncode == 1
    assert "ok   model up" in proc.stdout
    assert f"FAIL model down: model 'down': no answer from the server at {down}" in proc.stdout
    assert "Connect" in proc.stdout and "fix models.down.base_url" in proc.stdout
    assert "FAIL model wrong:" in proc.stdout and "does not serve 'other'" in proc.stdout
    assert "2 check(s) failed (model down, model wrong)" in proc.stderr


def test_unwritable_results_and_missing_replay_are_named(tmp_path):
    (tmp_path / "blocker").write_text("a file where the results folder should be")
    proc = check(tmp_path, {"rec": {"backend": "replay", "path": "missing.jsonl"}}, results="blocker/results")
    assert proc.returncode == 1
    assert "FAIL model rec: replay path missing.jsonl not found; fix models.rec.path" in proc.stdout
    assert "FAIL results: cannot write to blocker/results" in proc.stdout


def test_results_from_before_precision_was_a_path_part_are_named(tmp_path):
    (tmp_path / "results/runs/rec/zero_shot").mkdir(parents=True)
    (tmp_path / "rec.jsonl").write_text("")
    proc = check(tmp_path, {"rec": {"backend": "replay", "path": "rec.jsonl"}})
    assert proc.returncode == 1
    assert "FAIL results: results/runs/rec: results from before precision was a path part" in proc.stdout
    assert "kernelsweep relayout --results results" in proc.stdout


def test_invalid_config_exits_2(tmp_path):
    proc = check(tmp_path, {"bad": {"backend": "openai", "base_url": "http://127.0.0.1:1/v1", "model": "m",
                                    "wait_s": -1}})
    assert proc.returncode == 2 and "wait_s" in proc.stderr


def test_missing_directory_is_named(tmp_path):
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump({"results": "results"}))
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "check", "--configfile", str(path),
                           "--directory", str(tmp_path / "absent")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"--directory {tmp_path / 'absent'}: No such file or directory" in proc.stderr
    assert "Traceback" not in proc.stderr
