"""How candidate code is confined (parent side): probe once whether this
machine lets us build the namespaces of workers/launch.py, and build the
command line that starts a worker inside them.

Mechanisms, recorded in every eval's provenance:
- "namespaces": user, mount, PID, network and IPC namespaces; read-only
  filesystem but for the worker's own directories; hard rlimits; no
  capabilities. Needs unprivileged user namespaces (or root).
- "none": the kernel refused; the worker runs as a plain child process
  (own session, hard limits, orphans adopted and killed). Only allowed when
  KERNELSWEEP_ALLOW_UNCONFINED=1, since candidate code could then forge a verdict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from kernelsweep.evaluator.errors import HarnessError
from kernelsweep.taskcode import PACKAGE_ROOT

LAUNCHER = str(Path(__file__).resolve().parent / "workers" / "launch.py")
NAMESPACES, NONE = "namespaces", "none"
CONFINEMENT_FAILED = 98  # the launcher's exit status when a step inside the namespaces failed
REFUSED = 97             # ...when the kernel refused the namespaces themselves
# Always hidden from a worker: shared scratch places and service sockets.
ALWAYS_HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run")  # /dev is made anew (launch.py)


def launcher_argv(spec: dict, command: list[str]) -> list[str]:
    return [sys.executable, "-I", "-S", LAUNCHER, json.dumps(spec), "--", *command]


@lru_cache(maxsize=1)
def probe() -> tuple[str, str | None]:
    """(mechanism, why not namespaces) for this machine, tried once per process."""
    with tempfile.TemporaryDirectory(prefix="kernelsweep-probe-") as tmp:
        r, w = os.pipe()
        spec = {"pid_fd": w, "cwd": tmp, "binds": [{"source": tmp, "target": tmp, "writable": True}],
                "hide": ["/tmp"]}
        try:
            proc = subprocess.run(launcher_argv(spec, ["/bin/sh", "-c", f"touch {tmp}/ok"]), pass_fds=[w],
                                  capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError) as exc:
            return NONE, f"the launcher did not run: {exc}"
        finally:
            os.close(w)
            report = os.read(r, 4096)
            os.close(r)
        if proc.returncode == 0 and Path(tmp, "ok").exists():
            return NAMESPACES, None
        why = proc.stderr.strip().splitlines()[-1:] or [report.decode(errors="replace")]
        return NONE, f"namespaces unavailable (exit {proc.returncode}): {why[0]}"


def mechanism() -> str:
    """The mechanism in force, or HarnessError when candidates cannot be
    confined and unconfined runs were not allowed explicitly."""
    found, why = probe()
    if found == NONE and os.environ.get("KERNELSWEEP_ALLOW_UNCONFINED") != "1":
        raise HarnessError(f"candidate code cannot be confined on this machine ({why}); enable unprivileged "
                           "user namespaces (sysctl kernel.unprivileged_userns_clone=1 / "
                           "user.max_user_namespaces), or set KERNELSWEEP_ALLOW_UNCONFINED=1 to accept "
                           "verdicts a deliberate cheat could forge")
    return found


def worker_spec(*, private: Path, readable: list[Path], writable: list[Path], hide: list[Path],
                memory_limit: int | None) -> dict:
    """The launcher's spec for one confined worker: its private directory and
    `writable` bound writable, `readable` bound read-only (all at their own
    paths), `hide` and the usual scratch places hidden, hard limits set."""
    binds = [{"source": str(private), "target": str(private), "writable": True}]
    binds += [{"source": str(p), "target": str(p), "writable": True} for p in writable]
    binds += [{"source": str(p), "target": str(p), "writable": False} for p in readable]
    hidden = list(ALWAYS_HIDDEN) + [str(p) for p in hide if not _holds_essentials(Path(p))]
    limits = {"core": 0, "fsize": 16 << 30, "nofile": 4096, "as": memory_limit}
    return {"binds": binds, "hide": hidden, "limits": limits}


def _essentials() -> list[Path]:
    """What every worker needs to run at all: Python, this package, torch."""
    import importlib.util

    found = [Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)), Path(PACKAGE_ROOT)]
    spec = importlib.util.find_spec("torch")
    if spec and spec.origin:
        found.append(Path(spec.origin).resolve().parent)
    return [p.resolve() for p in found]


def _holds_essentials(path: Path) -> bool:
    path = path.resolve()
    return any(e == path or path in e.parents for e in _essentials())
