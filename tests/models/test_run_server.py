"""One model server per local run (kernelsweep.models.run_server): real server
processes on loopback. A replay model for the state-file rules (it loads in a
second), the embedded model once for the workflow: one server for every
generation job of a run, the same records as in-process generation, stopped
when the run ends."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kernelsweep.models import run_server
from kernelsweep.models.run_server import SharedBackend, attach, read_state, state_path, stop_all
from kernelsweep.study.matrix import REPO_ROOT

MESSAGES = [{"role": "user", "content": "Write a kernel."}]
CALL = dict(n=1, temperature=0.0, top_p=1.0, max_tokens=8, seed=1)


@pytest.fixture
def replay_spec(tmp_path):
    path = tmp_path / "replay.jsonl"
    path.write_text(json.dumps({"task": "L0-001", "turn": 0, "raw_response": "hello"}) + "\n")
    return {"backend": "replay", "path": str(path)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _wait_gone(pid: int, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return False


def test_attach_starts_one_server_and_reuses_it(tmp_path, replay_spec):
    folder = tmp_path / "servers"
    first = attach(folder, "rp", replay_spec)
    try:
        assert first["host"] == "127.0.0.1" and _alive(first["pid"])
        assert oct(state_path(folder, "rp").stat().st_mode & 0o777) == "0o600"
        again = attach(folder, "rp", replay_spec)
        assert again["pid"] == first["pid"] and again["port"] == first["port"]
        backend = SharedBackend("rp", replay_spec, folder)
        (done,) = backend.generate(MESSAGES, key={"task": "L0-001", "turn": 0}, **CALL)
        assert done.text == "hello" and backend.describe()["backend"] == "replay"
        # Without the token the server answers nothing.
        import httpx
        assert httpx.get(f"http://127.0.0.1:{first['port']}/health").status_code == 403
    finally:
        assert stop_all(folder) == ["rp: stopped"]
    assert _wait_gone(first["pid"]) and not state_path(folder, "rp").exists()


def test_stale_state_files_are_never_trusted(tmp_path, replay_spec):
    folder = tmp_path / "servers"
    folder.mkdir()
    path = state_path(folder, "rp")
    # A killed run's file whose server is gone (pid of an exited process).
    dead = subprocess.Popen(["true"])
    dead.wait()
    path.write_text(json.dumps({"pid": dead.pid, "host": "127.0.0.1", "hostname": os.uname().nodename, "port": 9,
                                "token": "x", "identity": run_server.identity("rp", replay_spec)}))
    fresh = attach(folder, "rp", replay_spec)
    assert fresh["pid"] != dead.pid and _alive(fresh["pid"])
    # A live process that is not our server (a reused pid): replaced, never killed.
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        path.write_text(json.dumps({**fresh, "pid": bystander.pid}))
        newer = attach(folder, "rp", replay_spec)
        assert newer["pid"] not in (bystander.pid, fresh["pid"])
        assert bystander.poll() is None
    finally:
        bystander.kill()
    # The leftover server is still running and ours, but the file was rewritten: stopped by its own state file.
    os.kill(fresh["pid"], signal.SIGTERM)
    # A live server of ours serving another model entry (the config changed): stopped and replaced.
    other = {**replay_spec, "model_id": "changed"}
    replaced = attach(folder, "rp", other)
    assert replaced["pid"] != newer["pid"] and _wait_gone(newer["pid"])
    stop_all(folder)
    assert _wait_gone(replaced["pid"])


def test_server_that_cannot_load_its_model_is_a_setup_error(tmp_path):
    from kernelsweep.models import ModelSetupError

    spec = {"backend": "transformers", "path": str(tmp_path / "no-such-checkpoint")}
    with pytest.raises(ModelSetupError):
        attach(tmp_path / "servers", "missing", spec, startup_timeout_s=120)
    assert not state_path(tmp_path / "servers", "missing").exists()


def test_idle_server_exits_by_itself(tmp_path, replay_spec):
    state = attach(tmp_path / "servers", "rp", replay_spec, idle_s=1.0)
    assert _wait_gone(state["pid"], timeout=30)
    assert read_state(state_path(tmp_path / "servers", "rp")) is None


@pytest.mark.slow
def test_a_run_starts_one_server_for_all_its_generation_jobs(embedded_checkpoint, tmp_path):
    """Four generation jobs of the embedded model (two tasks, two strategies): one
    server, the same records as in-process generation, stopped at the end of the run."""
    config = {"results": str(tmp_path / "results"), "device": "cpu",
              "tasks": {"source": "demo", "levels": [0], "ids": [1, 2]},
              "models": {"gemma": {"backend": "transformers", "path": str(embedded_checkpoint), "threads": 1,
                                   "max_tokens": 8}},
              "methods": {"zero_shot": {"strategy": "zero_shot"}, "iterative": {"strategy": "iterative"}}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    runs = tmp_path / "results/runs/fp32/gemma"
    targets = [str(runs / m / t / "s0/t0/c0/response.json") for m in ("zero_shot", "iterative")
               for t in ("L0-001", "L0-002")]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "study.yaml"), "--cores", "2", *targets]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    folder = tmp_path / "results/.run-servers"
    log = (folder / "gemma.log").read_text()
    assert log.count("kernelsweep serve-run: 'gemma' on 127.0.0.1:") == 1, log
    assert log.count("POST /generate") == 4, log
    assert not (folder / "gemma.json").exists(), "onsuccess stops the server"
    assert "model server gemma: stopped" in done.stderr
    records = [json.loads(Path(t).read_text()) for t in targets]
    assert all(r["status"] == "ok" for r in records)
    # The same text and model record as in-process generation of the same call.
    from kernelsweep.models import load_backend

    local = load_backend("gemma", config["models"]["gemma"])
    first = records[0]
    prompt = json.loads((Path(targets[0]).parents[1] / "prompt.json").read_text())
    (again,) = local.generate(prompt["messages"], n=1, temperature=0.0, top_p=1.0, max_tokens=8,
                              seed=first["seed"], key=prompt["key"])
    assert again.text == first["raw_text"]
    assert local.describe() == first["model"]
