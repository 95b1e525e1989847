"""Run a command in its own process group with a wall-clock limit; on timeout
the whole group is killed (a reference may spawn workers or hang in native
code, where only SIGKILL works)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

LOG_TAIL_CHARS = 4000


@dataclass
class Finished:
    returncode: int | None  # None when killed at the timeout
    timed_out: bool
    wall_s: float
    log_tail: str


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def run_with_timeout(argv: list[str], timeout_s: float, log_path: Path, env: dict[str, str] | None = None) -> Finished:
    """stdout and stderr go to log_path; its tail comes back in the result."""
    start = time.monotonic()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=env, start_new_session=True)
        try:
            proc.wait(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            timed_out = True
        except BaseException:  # e.g. Ctrl-C in the parent: never leave the child running
            _kill_group(proc)
            raise
    wall = time.monotonic() - start
    tail = log_path.read_bytes()[-LOG_TAIL_CHARS:].decode("utf-8", errors="replace")
    return Finished(None if timed_out else proc.returncode, timed_out, wall, tail)
