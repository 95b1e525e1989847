"""A local OpenAI-compatible server (`transformers serve`) on loopback.

`LocalServer` starts the server in its own process group, waits until
/v1/models lists the model, and always stops it: on leaving the `with` block,
on an exception, and at interpreter exit; the whole group is killed if it does
not stop in time. `kernelsweep serve` runs one in the foreground.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from kernelsweep.models.base import ModelSetupError
from kernelsweep.models.checkpoint import locate
from kernelsweep.runtime.process_group import stop_group

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def port_in_use(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def _tail(path: Path | None, lines: int = 25) -> str:
    if path is None or not path.is_file():
        return "(no log file)"
    with open(path, errors="replace") as f:
        return "".join(deque(f, maxlen=lines)).rstrip() or "(log is empty)"


class LocalServer:
    """`transformers serve CHECKPOINT` on host:port, pinned to that one model.

    `model_id` is the name requests must use (the server's own name for the
    checkpoint), `base_url` ends with /v1."""

    def __init__(self, checkpoint: str, *, port: int | None = None, host: str = LOOPBACK, device: str = "cpu",
                 dtype: str = "auto", startup_timeout_s: float = 300.0, log_path: str | Path | None = None,
                 stop_timeout_s: float = 15.0, threads: int | None = None):
        self.location = location = locate(checkpoint)
        if location.gguf_file:
            # transformers serve names GGUF weights `<repo>:<file>`.
            self.model_id = f"{location.path}:{location.gguf_file}"
        else:
            self.model_id = location.path
        self.host, self.port = host, port
        self.device, self.dtype, self.threads = device, dtype, threads
        self.startup_timeout_s, self.stop_timeout_s = startup_timeout_s, stop_timeout_s
        self.log_path = Path(log_path) if log_path else None
        self.process: subprocess.Popen | None = None
        self._log_file = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        return [sys.executable, "-m", "transformers.cli.transformers", "serve", self.model_id,
                "--host", self.host, "--port", str(self.port), "--device", self.device, "--dtype", self.dtype,
                "--log-level", "info"]

    def start(self) -> "LocalServer":
        if self.process is not None:
            return self
        if self.port is None:
            self.port = free_port(self.host)
        elif port_in_use(self.port, self.host):
            raise ModelSetupError(f"cannot serve on {self.host}:{self.port}: the port is already in use")
        env = {**os.environ, "HF_HUB_DISABLE_UPDATE_CHECK": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}
        if self.location.source != "hub":
            env["HF_HUB_OFFLINE"] = "1"  # a local checkpoint needs no network
        if self.threads:
            env["OMP_NUM_THREADS"] = str(self.threads)  # torch's CPU thread pool
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT
                if self._log_file else None, env=env, start_new_session=True)
        except OSError as e:
            self._close_log()
            raise ModelSetupError(f"cannot start transformers serve: {e}") from e
        atexit.register(self.stop)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        import httpx

        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            code = self.process.poll()
            if code is not None:
                raise ModelSetupError(
                    f"transformers serve exited with code {code} before it was ready "
                    f"(log {self.log_path}):\n{_tail(self.log_path)}")
            try:
                reply = httpx.get(f"{self.base_url}/models", timeout=2.0)
                if reply.status_code == 200 and self.model_id in {m.get("id") for m in reply.json().get("data", [])}:
                    return
            except (httpx.HTTPError, ValueError):
                pass  # not listening yet, or still loading
            if time.monotonic() > deadline:
                raise ModelSetupError(
                    f"transformers serve was not ready on {self.base_url} after {self.startup_timeout_s:.0f} s "
                    f"(log {self.log_path}):\n{_tail(self.log_path)}")
            time.sleep(0.5)

    def stop(self) -> None:
        """SIGTERM to the group, SIGKILL to whatever is left after stop_timeout_s."""
        process, self.process = self.process, None
        atexit.unregister(self.stop)
        if process is not None:
            stop_group(process, self.stop_timeout_s)
        self._close_log()

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def wait(self) -> int:
        """Block until the server exits; its exit code."""
        return self.process.wait() if self.process else 0

    def __enter__(self) -> "LocalServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def raise_on_sigterm() -> None:
    """Turn SIGTERM (Snakemake, SLURM, kill) into SystemExit so `finally` and
    `with` blocks run and a started server is stopped, not orphaned."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, handler)


# ---- `kernelsweep serve` ----

def configure(parser) -> None:
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder, .gguf file or hub id to serve")
    parser.add_argument("--port", type=int, default=None, help="port (default: a free one)")
    parser.add_argument("--host", default=LOOPBACK,
                        help=f"address to listen on (default {LOOPBACK}: this machine only)")
    parser.add_argument("--device", default="auto", help="cpu | cuda | cuda:N | auto (default auto)")
    parser.add_argument("--dtype", default="auto", help="float32 | float16 | bfloat16 | auto (default auto)")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for torch (default: torch's choice)")
    parser.add_argument("--startup-timeout-s", type=float, default=300.0)
    parser.add_argument("--log", default=None, help="write the server's output to this file (default: the terminal)")


def main(args) -> int:
    raise_on_sigterm()
    try:
        server = LocalServer(args.checkpoint, port=args.port, host=args.host, device=args.device, dtype=args.dtype,
                             startup_timeout_s=args.startup_timeout_s, log_path=args.log, threads=args.threads)
        with server:
            print(f"serving {server.model_id}\n  base_url: {server.base_url}\n  model:    {server.model_id}\n"
                  "Ctrl-C stops it.", flush=True)
            code = server.wait()
            if code:
                print(f"kernelsweep serve: the server exited with code {code}", file=sys.stderr)
                return 1
    except ModelSetupError as e:
        print(f"kernelsweep serve: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    return 0
