"""One in-process model per run, shared by every generation job of that run.

Loading the embedded model takes most of a demo generation job (~40 s of ~65 s
on 2 cores). When the workflow runs its jobs on this machine, it sets
KERNELSWEEP_RUN_SERVERS to a folder ({results}/.run-servers); a job whose model
is `backend: transformers` then gets a `SharedBackend`: the first job of the run
starts `kernelsweep serve-run` (the same TransformersBackend, loaded once, behind
a small HTTP server on 127.0.0.1 only), later jobs attach to it. The workflow's
onsuccess/onerror stop it; a server whose run was killed exits by itself after
`idle_s` without a call.

The state file `{folder}/{model}.json` (pid, host, port, identity, token; mode
0600) is written by the server once it answers. It is never trusted blindly: a
job uses the server only when the file was written on this host, the server
answers /health on loopback with the file's token, and its identity (the model
entry and the checkpoint's files) is the job's own. Otherwise a leftover server
of ours is stopped (its command line must name the state file) and a new one is
started, under a lock so two jobs never start two servers.

Results are those of in-process generation: the server runs the same backend
code with the same seeds; calls that sample (temperature > 0) run one at a time
because torch's random generator is global, greedy calls run side by side.
Without the variable (SLURM jobs, tests, a direct `kernelsweep generate`) each
job loads the model itself, as before.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kernelsweep.models.base import (Backend, Completion, GenerationFailed, InfrastructureFailure, ModelSetupError)

ENV = "KERNELSWEEP_RUN_SERVERS"
LOOPBACK = "127.0.0.1"
SHARED_BACKENDS = ("transformers",)
DEFAULT_IDLE_S = 900.0
STARTUP_TIMEOUT_S = 600.0
_ERRORS = {"GenerationFailed": GenerationFailed, "InfrastructureFailure": InfrastructureFailure,
           "ModelSetupError": ModelSetupError}


def run_folder() -> Path | None:
    value = os.environ.get(ENV)
    return Path(value) if value else None


def identity(name: str, spec: dict[str, Any]) -> str:
    """What the server must be: the model entry and its checkpoint's files (size, mtime)."""
    files = []
    path = Path(str(spec.get("path", "")))
    if path.exists():
        for p in sorted([path] if path.is_file() else path.iterdir()):
            if p.is_file():
                st = p.stat()
                files.append([p.name, st.st_size, st.st_mtime_ns])
    text = json.dumps({"name": name, "spec": spec, "files": files}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def state_path(folder: Path, name: str) -> Path:
    return Path(folder) / f"{name}.json"


def read_state(path: Path) -> dict[str, Any] | None:
    try:
        state = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def health(state: dict[str, Any], timeout: float = 5.0) -> dict[str, Any] | None:
    """The server's /health answer when it is ours (token) and on loopback; None otherwise."""
    import httpx

    if state.get("host") != LOOPBACK or not isinstance(state.get("port"), int):
        return None
    try:
        reply = httpx.get(f"http://{LOOPBACK}:{state['port']}/health", timeout=timeout,
                          headers={"Authorization": f"Bearer {state.get('token', '')}"})
        body = reply.json() if reply.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return body if isinstance(body, dict) and body.get("pid") == state.get("pid") else None


def usable(state: dict[str, Any] | None, want: str) -> dict[str, Any] | None:
    """The health answer when this state describes a live server of this host, ours, serving `want`."""
    if not state or state.get("hostname") != socket.gethostname() or state.get("identity") != want:
        return None
    if not isinstance(state.get("pid"), int) or not _pid_alive(state["pid"]):
        return None
    answer = health(state)
    return answer if answer and answer.get("identity") == want else None


def stop(path: Path, timeout_s: float = 15.0) -> str:
    """Stop the server a state file names, if it is still the process we started; remove the file."""
    state = read_state(path)
    path.unlink(missing_ok=True)
    if not state or not isinstance(state.get("pid"), int) or state.get("hostname") != socket.gethostname():
        return "no server"
    pid = state["pid"]
    # Only a process whose command line names this state file is ours (a pid may have been reused).
    if not _pid_alive(pid) or str(path.resolve()) not in _cmdline(pid):
        return "gone"
    try:
        os.killpg(pid, signal.SIGTERM)
    except (ProcessLookupError, PermissionError):
        return "gone"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _pid_alive(pid) and str(path.resolve()) in _cmdline(pid):
        time.sleep(0.1)
    if _pid_alive(pid) and str(path.resolve()) in _cmdline(pid):
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return "stopped"


def stop_all(folder: Path | str) -> list[str]:
    """The workflow's onsuccess/onerror: stop every server of this run's folder."""
    folder = Path(folder)
    return [f"{p.stem}: {stop(p)}" for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []


def attach(folder: Path, name: str, spec: dict[str, Any], idle_s: float = DEFAULT_IDLE_S,
           startup_timeout_s: float = STARTUP_TIMEOUT_S) -> dict[str, Any]:
    """The state of a healthy server for this model, started if needed (one per folder and model)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = state_path(folder, name)
    want = identity(name, spec)
    with open(folder / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released by the kernel when a killed job dies
        state = read_state(path)
        if usable(state, want):
            return state
        if state is not None:
            print(f"kernelsweep: the model server in {path} is not usable (stale, another model or not ours): "
                  f"{stop(path)}; starting a new one", file=sys.stderr)
        return _start(path, name, spec, want, idle_s, startup_timeout_s)


def _start(path: Path, name: str, spec: dict[str, Any], want: str, idle_s: float,
           startup_timeout_s: float) -> dict[str, Any]:
    path.unlink(missing_ok=True)
    log = path.with_suffix(".log")
    spec_file = path.with_suffix(".spec")
    spec_file.write_text(json.dumps(spec))
    cmd = [sys.executable, "-m", "kernelsweep", "serve-run", "--model", name, "--model-spec", str(spec_file),
           "--identity", want, "--state", str(path.resolve()), "--idle-s", str(idle_s)]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # outlives this job: later jobs of the run use it
    deadline = time.monotonic() + startup_timeout_s
    while True:
        state = read_state(path)
        if state and state.get("pid") == proc.pid and usable(state, want):
            return state
        code = proc.poll()
        if code is not None:
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            if code == 3:  # the model could not be loaded as configured
                raise ModelSetupError(f"model '{name}': {tail.strip().splitlines()[-1] if tail.strip() else ''} "
                                      f"(log {log})")
            raise InfrastructureFailure(f"the run's model server for '{name}' exited with code {code} before "
                                        f"it answered (log {log}):\n{tail}")
        if time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            raise InfrastructureFailure(f"the run's model server for '{name}' did not answer within "
                                        f"{startup_timeout_s:.0f} s (log {log})")
        time.sleep(0.25)


class SharedBackend(Backend):
    """A model entry served by the run's server: the same describe() and generate() as in-process."""

    def __init__(self, name: str, spec: dict[str, Any], folder: Path):
        super().__init__(name, spec)
        self.kind = spec["backend"]
        self.folder = folder
        self._state: dict[str, Any] | None = None
        self._describe: dict[str, Any] | None = None

    def _server(self) -> dict[str, Any]:
        if self._state is None:
            self._state = attach(self.folder, self.name, self.spec)
        return self._state

    def _info(self) -> dict[str, Any]:
        if self._describe is None:
            answer = health(self._server(), timeout=30.0)
            if not answer:
                raise InfrastructureFailure(f"the run's model server for '{self.name}' stopped answering")
            self._describe = answer["describe"]
        return self._describe

    @property
    def model_id(self) -> str:
        return self._info()["model_id"]

    @property
    def revision(self) -> str | None:
        return self._info()["revision"]

    def describe(self) -> dict[str, Any]:
        return dict(self._info())

    def generate(self, messages: list[dict], *, n: int, temperature: float, top_p: float,
                 max_tokens: int, seed: int, key: dict) -> list[Completion]:
        import httpx

        body = {"messages": messages, "n": n, "temperature": temperature, "top_p": top_p, "max_tokens": max_tokens,
                "seed": seed, "key": key}
        for attempt in (0, 1):
            state = self._server()
            try:
                reply = httpx.post(f"http://{LOOPBACK}:{state['port']}/generate", json=body, timeout=None,
                                   headers={"Authorization": f"Bearer {state['token']}"})
            except httpx.ConnectError as e:
                # It stopped between the health check and this call (idle exit): start it again once.
                self._state = self._describe = None
                if attempt:
                    raise InfrastructureFailure(f"the run's model server for '{self.name}' refused the "
                                                f"connection: {e}") from e
                continue
            except httpx.HTTPError as e:
                raise InfrastructureFailure(f"the run's model server for '{self.name}' gave no answer: "
                                            f"{type(e).__name__}: {e}") from e
            break
        try:
            answer = reply.json()
        except ValueError as e:
            raise InfrastructureFailure(f"the run's model server for '{self.name}' sent an invalid reply "
                                        f"(HTTP {reply.status_code})") from e
        if "error" in answer:
            kind = _ERRORS.get(answer["error"].get("type"), InfrastructureFailure)
            raise kind(answer["error"].get("message", "(no message)"))
        self._describe = answer["describe"]
        return [Completion(**c) for c in answer["completions"]]


def shared_or_none(name: str, spec: dict[str, Any]) -> Backend | None:
    folder = run_folder()
    if folder is None or spec.get("backend") not in SHARED_BACKENDS:
        return None
    return SharedBackend(name, spec, folder)


# ---- `kernelsweep serve-run` (started by attach, never by hand) ----

def configure(parser) -> None:
    parser.add_argument("--model", required=True)
    parser.add_argument("--model-spec", required=True, help="JSON file: the model entry")
    parser.add_argument("--identity", required=True)
    parser.add_argument("--state", required=True, help="state file written once the server answers")
    parser.add_argument("--idle-s", type=float, default=DEFAULT_IDLE_S, help="exit after this long without a call")


def main(args) -> int:
    from kernelsweep.models import load_backend
    from kernelsweep.models.server import raise_on_sigterm

    raise_on_sigterm()
    os.environ.pop(ENV, None)  # this process is the server: its backend loads the model itself
    state_file = Path(args.state)
    spec = json.loads(Path(args.model_spec).read_text())
    try:
        backend = load_backend(args.model, {**spec})  # never shared: this process is the server
        if hasattr(backend, "_loaded"):
            backend._loaded()  # load the weights now, before the server says it is ready
        describe = backend.describe()
    except ModelSetupError as e:
        print(f"kernelsweep serve-run: {e}", file=sys.stderr)
        return 3
    token = secrets.token_hex(16)
    sampling = threading.Lock()  # torch.manual_seed is global: sampled calls one at a time
    last_call = [time.monotonic()]
    busy = [0]
    busy_lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):  # one line per call, in the server's log
            sys.stderr.write(f"{self.address_string()} {fmt % a}\n")

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _authorised(self) -> bool:
            if self.headers.get("Authorization") != f"Bearer {token}":
                self._send(403, {"error": {"type": "Forbidden", "message": "wrong token"}})
                return False
            return True

        def do_GET(self):
            if self.path == "/health" and self._authorised():
                self._send(200, {"pid": os.getpid(), "identity": args.identity, "model": args.model,
                                 "describe": describe})
            elif self.path != "/health":
                self._send(404, {})

        def do_POST(self):
            if self.path != "/generate":
                return self._send(404, {})
            if not self._authorised():
                return
            with busy_lock:
                busy[0] += 1
            try:
                req = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                call = dict(n=int(req["n"]), temperature=float(req["temperature"]), top_p=float(req["top_p"]),
                            max_tokens=int(req["max_tokens"]), seed=int(req["seed"]), key=req["key"])
                try:
                    if call["temperature"] == 0:
                        completions = backend.generate(req["messages"], **call)
                    else:
                        with sampling:
                            completions = backend.generate(req["messages"], **call)
                except (GenerationFailed, InfrastructureFailure, ModelSetupError) as e:
                    return self._send(200, {"error": {"type": type(e).__name__, "message": str(e)}})
                self._send(200, {"completions": [c.to_dict() for c in completions], "describe": backend.describe()})
            finally:
                with busy_lock:
                    busy[0] -= 1
                    last_call[0] = time.monotonic()

    server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    state = {"pid": os.getpid(), "host": LOOPBACK, "hostname": socket.gethostname(), "port": port,
             "token": token, "identity": args.identity, "model": args.model, "started": time.time()}
    tmp = state_file.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(state, f)
    os.replace(tmp, state_file)
    print(f"kernelsweep serve-run: '{args.model}' on {LOOPBACK}:{port} (pid {os.getpid()})", file=sys.stderr,
          flush=True)

    def idle_watch():
        while True:
            time.sleep(min(5.0, args.idle_s))
            with busy_lock:
                idle = busy[0] == 0 and time.monotonic() - last_call[0] > args.idle_s
            if idle:
                print(f"kernelsweep serve-run: no call for {args.idle_s:.0f} s, exiting", file=sys.stderr, flush=True)
                server.shutdown()
                return

    threading.Thread(target=idle_watch, daemon=True).start()
    try:
        server.serve_forever(poll_interval=0.5)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        server.server_close()
        # Remove the state file only if it still names this process.
        current = read_state(state_file)
        if current and current.get("pid") == os.getpid():
            state_file.unlink(missing_ok=True)
    return 0
