"""Run the profiling child with a wall-clock limit (kernelsweep.process_group):
a reference may spawn workers or hang in native code, where only SIGKILL works."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kernelsweep.process_group import read_tail, run_in_group


@dataclass
class Finished:
    returncode: int | None  # None when killed at the timeout
    timed_out: bool
    wall_s: float
    log_tail: str


def run_with_timeout(argv: list[str], timeout_s: float, log_path: Path, env: dict[str, str] | None = None) -> Finished:
    """stdout and stderr go to log_path; its tail comes back in the result."""
    with open(log_path, "wb") as log:
        done = run_in_group(argv, timeout_s, stdout=log, stderr=log, env=env)
    return Finished(done.returncode, done.timed_out, done.wall_s, read_tail(log_path))
