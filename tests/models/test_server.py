"""LocalServer and the openai backend through a real `transformers serve` on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import httpx
import psutil
import pytest
from model_helpers import MESSAGES, make_key

from kernelsweep.models import ModelSetupError, load_backend
from kernelsweep.models.server import LocalServer, free_port
from kernelsweep.core.seeds import seed_for

TOKENS = 6


def group_alive(pgid: int, wait_s: float = 5.0) -> bool:
    """Whether a live (non-zombie) process of the group remains; orphans killed
    with the group may take a moment to be reaped, and a container's init may
    never reap them, so zombies do not count."""
    deadline = time.monotonic() + wait_s
    while True:
        alive = []
        for proc in psutil.process_iter(["pid", "status"]):
            try:
                if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                    alive.append(proc.pid)
            except (ProcessLookupError, psutil.Error):
                continue
        if not alive or time.monotonic() > deadline:
            return bool(alive)
        time.sleep(0.2)


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_missing_checkpoint_starts_nothing(tmp_path):
    with pytest.raises(ModelSetupError, match="checkpoint not found"):
        LocalServer(str(tmp_path / "nothing"))


def test_busy_port_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        with pytest.raises(ModelSetupError, match="already in use"):
            LocalServer(str(tmp_path), port=s.getsockname()[1]).start()


class StubbornServer(LocalServer):
    """A real process that ignores SIGTERM and has a child in its group, serving
    /v1/models: stop() has to kill the group."""

    def command(self):
        script = textwrap.dedent(f"""
            import json, signal, subprocess, sys
            from http.server import BaseHTTPRequestHandler, HTTPServer
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
            class H(BaseHTTPRequestHandler):
                def do_GET(self):
                    body = json.dumps({{"data": [{{"id": {self.model_id!r}}}]}}).encode()
                    self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *a): pass
            HTTPServer(("127.0.0.1", {self.port}), H).serve_forever()
        """)
        return [sys.executable, "-c", script]


def test_stop_kills_a_group_that_ignores_sigterm(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    server = StubbornServer(str(tmp_path), stop_timeout_s=1.0, log_path=tmp_path / "server.log", startup_timeout_s=60)
    with server:
        pgid = server.process.pid
        assert httpx.get(f"{server.base_url}/models").status_code == 200
        time.sleep(0.5)  # let the child start
        assert group_alive(pgid, wait_s=0)
    assert not group_alive(pgid) and not port_open(server.port)


def test_server_that_dies_at_startup_reports_its_log(tmp_path):
    (tmp_path / "config.json").write_text("{}")

    class Crashing(LocalServer):
        def command(self):
            return [sys.executable, "-c", "import sys; print('weights are corrupt'); sys.exit(3)"]

    with pytest.raises(ModelSetupError, match="exited with code 3(.|\n)*weights are corrupt"):
        Crashing(str(tmp_path), log_path=tmp_path / "server.log").start()


@pytest.fixture(scope="module")
def served(embedded_checkpoint, tmp_path_factory):
    log = tmp_path_factory.mktemp("serve") / "server.log"
    with LocalServer(str(embedded_checkpoint), device="cpu", log_path=log, startup_timeout_s=600) as server:
        pgid = server.process.pid
        yield server
    assert not group_alive(pgid)


@pytest.mark.slow
def test_openai_backend_against_transformers_serve(served, embedded_checkpoint):
    spec = {"backend": "openai", "base_url": served.base_url, "model": served.model_id, "chat": False,
            "n_per_request": False, "timeout_s": 600, "max_retries": 1}
    with load_backend("served", spec) as b:
        key = make_key()
        first = b.generate(MESSAGES, n=2, temperature=0.0, top_p=1.0, max_tokens=TOKENS, seed=seed_for(key, 0),
                           key=key)
        assert [c.seed for c in first] == [seed_for(key, 0), seed_for(key, 1)]
        assert all(c.text.strip() and c.completion_tokens <= TOKENS and c.prompt_tokens > 10 for c in first)
        assert first[0].text == first[1].text  # greedy
        # The server and the in-process backend run the same weights on the same prompt.
        local = load_backend("local", {"backend": "transformers", "path": str(embedded_checkpoint)})
        (same,) = local.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=TOKENS, seed=0, key=key)
        assert same.text == first[0].text
        # Sampling with a seed is reproducible through the server too.
        a = b.generate(MESSAGES, n=1, temperature=1.0, top_p=1.0, max_tokens=TOKENS, seed=11, key={})
        b2 = b.generate(MESSAGES, n=1, temperature=1.0, top_p=1.0, max_tokens=TOKENS, seed=11, key={})
        assert a[0].text == b2[0].text


@pytest.mark.slow
def test_unknown_model_name_against_transformers_serve(served):
    spec = {"backend": "openai", "base_url": served.base_url, "model": "Qwen/Qwen2.5-Coder-7B-Instruct",
            "chat": False}
    with pytest.raises(ModelSetupError, match=f"does not serve 'Qwen/Qwen2.5-Coder-7B-Instruct'.*{served.model_id}"):
        load_backend("x", spec).generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=2, seed=0, key={})


@pytest.mark.slow
def test_backend_starts_and_stops_its_own_server(embedded_checkpoint, tmp_path):
    spec = {"backend": "openai", "chat": False, "max_tokens": TOKENS, "timeout_s": 600,
            "server": {"start": True, "checkpoint": str(embedded_checkpoint), "log": str(tmp_path / "s.log"),
                       "startup_timeout_s": 600}}
    backend = load_backend("embedded-served", spec)
    with backend:
        (c,) = backend.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=TOKENS, seed=0, key={})
        assert c.text.strip()
        pgid, port = backend.server.process.pid, backend.server.port
        assert backend.describe()["revision"].startswith("sha256:")
    assert not group_alive(pgid) and not port_open(port)


@pytest.mark.slow
def test_startup_timeout_stops_the_server(embedded_checkpoint, tmp_path):
    server = LocalServer(str(embedded_checkpoint), startup_timeout_s=1.0, log_path=tmp_path / "s.log")
    with pytest.raises(ModelSetupError, match="not ready.*after 1 s"):
        server.start()
    assert server.process is None and not port_open(server.port)


@pytest.mark.slow
def test_kernelsweep_serve_foreground_stops_on_sigterm(embedded_checkpoint, tmp_path):
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kernelsweep", "serve", "--checkpoint", str(embedded_checkpoint),
                             "--port", str(port), "--device", "cpu", "--log", str(tmp_path / "s.log")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # printed once /v1/models answers
        assert line.startswith("serving "), proc.stderr.read() if proc.poll() is not None else line
        assert httpx.get(f"http://127.0.0.1:{port}/v1/models").status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM  # SIGTERM became SystemExit: `with` cleaned up
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while port_open(port) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not port_open(port)
