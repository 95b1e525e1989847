"""The child side of the private link between the harness and a worker.

The parent writes the worker's configuration (with a per-run random nonce and
the numbers of two inherited pipe descriptors) to the child's stdin. The child
reads it before any candidate code exists, points stdin at /dev/null, and from
then on reports only through the report pipe, each line stamped with the
nonce. The control pipe carries the parent's "go" to a worker that waits for
the reference. Everything used here is captured at import time, so that a
candidate replacing json.dumps or os.write later changes nothing."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

_dumps = json.dumps
_write = os.write
_read = os.read
_monotonic = time.monotonic


def read_config() -> dict[str, Any]:
    """Read the JSON configuration from stdin, then detach stdin."""
    raw = sys.stdin.buffer.read()
    config = json.loads(raw.decode("utf-8"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return config


class Channel:
    def __init__(self, config: dict[str, Any]):
        self._fd = int(config["report_fd"])
        self._nonce = str(config["nonce"])
        control = config.get("control_fd")
        self._control_fd = int(control) if control is not None else None

    def send(self, kind: str, **payload: Any) -> None:
        line = _dumps({"nonce": self._nonce, "kind": kind, **payload}, default=str) + "\n"
        data = line.encode("utf-8")
        while data:
            written = _write(self._fd, data)
            data = data[written:]

    def phase(self, name: str) -> None:
        self.send("phase", phase=name, t=_monotonic())

    def result(self, payload: dict[str, Any]) -> None:
        self.send("result", payload=payload)

    def wait_for_go(self) -> dict[str, Any] | None:
        """Block until the parent sends one JSON line on the control pipe; None
        when the parent closed it (abort)."""
        if self._control_fd is None:
            return {}
        self.phase("waiting")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = _read(self._control_fd, 65536)
            if not chunk:
                return None
            buf += chunk
        return json.loads(buf.decode("utf-8"))


def finish(code: int = 0) -> None:
    """Leave at once: no atexit handlers, no interpreter teardown, nothing a
    candidate registered (and no teardown crash after the verdict is sent)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:
        pass
    os._exit(code)
