"""Children that run untrusted or heavy code (references, candidates, model
servers) start in their own session, so one signal to the group reaches
everything they spawned: compiler jobs, dataloader workers, a server's
subprocesses. SIGKILL is the only signal that stops a process hung in native
code or a CUDA call. What leaves the group on purpose (a new session or group)
is caught another way: the parent adopts orphans (adopt_orphans) and kills the
adopted ones (kill_adopted)."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Callable, ContextManager

TAIL_CHARS = 4000
PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def kill_group(pid: int, sig: int = signal.SIGKILL) -> bool:
    """Signal a group led by pid; False when it is already gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the group, SIGKILL whatever is left after grace_s (also the
    children that outlived their leader), and reap the leader."""
    kill_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    kill_group(proc.pid)
    proc.wait()


def adopt_orphans() -> bool:
    """Make this process the parent of its orphaned descendants (Linux): a child
    that double-forks into a new session or group escapes a group kill, but then
    becomes our child, where kill_adopted finds it. False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def child_pids() -> dict[int, tuple[int, int]]:
    """This process's children: pid -> (process group, session), from /proc."""
    me, found = os.getpid(), {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        if int(fields[1]) == me:  # fields: state ppid pgrp session ...
            found[int(entry)] = (int(fields[2]), int(fields[3]))
    return found


def kill_adopted(spared: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """SIGKILL, with their groups, the children of this process that run in
    another session than ours and are not `spared`: descendants of finished
    children that left their group and were adopted (adopt_orphans). Children
    we start in our own session (a quick `nvidia-smi`) are never touched.
    Repeats while killing one makes its own children ours. The pids killed."""
    own_group, own_session = os.getpgid(0), os.getsid(0)
    killed: list[int] = []
    for _ in range(20):
        strays = {pid: ids for pid, ids in child_pids().items()
                  if pid not in spared and ids[1] != own_session}
        if not strays:
            break
        for pid, (group, _session) in strays.items():
            if group != own_group:
                kill_group(group)
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for pid in strays:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        killed += strays
    return killed


@dataclass
class GroupRun:
    returncode: int | None  # None when killed at the timeout
    timed_out: bool
    wall_s: float


def run_in_group(argv: list[str], timeout_s: float, *, stdout: IO | int | None = subprocess.DEVNULL,
                 stderr: IO | int | None = subprocess.STDOUT, cwd: str | os.PathLike | None = None,
                 env: dict[str, str] | None = None,
                 turn: Callable[[subprocess.Popen], ContextManager[float]] | None = None) -> GroupRun:
    """Run argv in a new session with a wall-clock limit. At the limit, on an
    exception in the parent (Ctrl-C) and after a normal exit, the whole group is
    killed: nothing the child started outlives it. `turn(proc)`, where given,
    is entered once the child runs and held until it ends (e.g. a device's
    turn); the seconds it yields (spent waiting) do not count against the limit."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=cwd, env=env,
                            start_new_session=True)
    timed_out = False
    try:
        with turn(proc) if turn is not None else nullcontext(0.0) as waited:
            try:
                proc.wait(timeout=max(0.0, start + timeout_s + (waited or 0.0) - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                kill_group(proc.pid)
                proc.wait()
    finally:
        kill_group(proc.pid)
        proc.wait()
    return GroupRun(None if timed_out else proc.returncode, timed_out, time.monotonic() - start)


def read_tail(path: Path, chars: int = TAIL_CHARS) -> str:
    try:
        return path.read_bytes()[-chars:].decode("utf-8", errors="replace")
    except OSError:
        return ""


def describe_exit(returncode: int | None) -> str:
    """'was killed by SIGSEGV' / 'exited with code 3', for error messages."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (SIGKILL from outside often means out of memory)" if name == "SIGKILL" else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {returncode}"
