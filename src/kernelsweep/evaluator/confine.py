"""How candidate code is confined (parent side): probe once whether this
machine lets us build the namespaces of untrusted/launch.py, and build the
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
from kernelsweep.runtime.taskcode import PACKAGE_ROOT

LAUNCHER = str(Path(__file__).resolve().parent / "untrusted" / "launch.py")
NAMESPACES, NONE = "namespaces", "none"
CONFINEMENT_FAILED = 98  # the launcher's exit status when a step inside the namespaces failed
REFUSED = 97             # ...when the kernel refused the namespaces themselves
# Always hidden from a worker: shared scratch places and service sockets.
ALWAYS_HIDDEN = ("/tmp", "/var/tmp", "/run", "/var/run")  # /dev is made anew (launch.py)
# The harness's own scratch directories (an evaluation's secret inputs live there): never bound back.
SCRATCH_PREFIXES = tuple(f"kernelsweep-{use}-" for use in
                         ("eval", "compile", "probe", "baseline", "profile", "validate", "check"))


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


# What to change when the kernel refuses the namespaces, and the opt-out.
REFUSED_FIX = ("allow unprivileged user namespaces (any kernel: sysctl user.max_user_namespaces=10000; Debian "
               "kernels: sysctl kernel.unprivileged_userns_clone=1; Ubuntu 23.10 and later, where AppArmor "
               "restricts them: sysctl kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile "
               "granting `userns` to this python; in a container: start it with user namespaces allowed, "
               "e.g. docker's --security-opt seccomp=unconfined --security-opt apparmor=unconfined), or set "
               "KERNELSWEEP_ALLOW_UNCONFINED=1 to run candidates unconfined and accept verdicts a deliberate "
               "cheat could forge")


def mechanism() -> str:
    """The mechanism in force, or HarnessError when candidates cannot be
    confined and unconfined runs were not allowed explicitly."""
    found, why = probe()
    if found == NONE and os.environ.get("KERNELSWEEP_ALLOW_UNCONFINED") != "1":
        raise HarnessError(f"candidate code cannot be confined on this machine ({why}): {REFUSED_FIX}")
    return found


WORKER_READY = "kernelsweep: confined worker ready"


def check_workers(device: str = "cpu", timeout_s: float = 600.0) -> str | None:
    """Start one worker as the evaluator starts them (confined, same
    interpreter, same visible paths) and have it import torch and the harness
    (and count the GPUs on cuda): None when it did, else what went wrong and
    what to change. A run does this once before its first job."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return f"torch is not installed for {sys.executable} (the interpreter the jobs run): install it there"
    try:
        found = mechanism()
    except HarnessError as e:
        return str(e)
    code = "import torch, kernelsweep.evaluator.untrusted.frame"
    if device == "cuda":
        code += "; assert torch.cuda.device_count() > 0, 'torch sees no CUDA device inside the confinement'"
    argv = [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r}); {code}; "
                                        f"print({WORKER_READY!r})"]
    with tempfile.TemporaryDirectory(prefix="kernelsweep-check-") as tmp:
        if found == NAMESPACES:
            spec = worker_spec(private=Path(tmp), readable=[], writable=[], hide=[], memory_limit=None)
            argv = launcher_argv(dict(spec, cwd=tmp), argv)
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        except subprocess.TimeoutExpired:
            return f"a confined worker did not finish importing torch within {timeout_s:g} s"
        except OSError as e:
            return f"the worker launcher did not start: {e}"
    if proc.returncode == 0 and WORKER_READY in proc.stdout:
        return None
    return failure_message(proc.stderr)


def failure_message(log: str) -> str:
    """What a worker that could not start inside the confinement says, with
    what to change."""
    lines = [line for line in log.strip().splitlines() if line.strip()]
    last = lines[-1] if lines else "(no output)"
    if "confinement refused" in log:
        return f"candidate code cannot be confined on this machine ({last}): {REFUSED_FIX}"
    return (f"a confined worker could not start: {last}. Inside the confinement /tmp, /var/tmp, /run and "
            "/var/run are hidden; what the interpreter needs (itself and the links to it, sys.prefix, every "
            "sys.path entry, this project, torch, the libraries this process loaded, LD_LIBRARY_PATH, CUDA_HOME "
            "and the compilers on PATH) is made visible read-only wherever it lives. Something it needs is "
            "outside that list: put it on one of those paths, or install the environment elsewhere. "
            "`kernelsweep confinement` repeats this check; KERNELSWEEP_ALLOW_UNCONFINED=1 runs unconfined only "
            "where the kernel refuses namespaces")


def configure(parser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")


def main(args) -> int:
    """`kernelsweep confinement`: the check a run makes before its first job."""
    problem = check_workers(args.device)
    if problem:
        print(f"kernelsweep confinement: {problem}", file=sys.stderr)
        return 1
    print(f"kernelsweep confinement: ok ({mechanism()}; a confined worker imported torch and kernelsweep)")
    return 0


def worker_spec(*, private: Path, readable: list[Path], writable: list[Path], hide: list[Path],
                memory_limit: int | None) -> dict:
    """The launcher's spec for one confined worker: its private directory and
    `writable` bound writable, `readable` bound read-only (all at their own
    paths), `hide` and the usual scratch places hidden, hard limits set.
    What the interpreter needs to run (runtime_paths) and that lies in a
    hidden place (a checkout or venv under /tmp) comes back read-only."""
    hidden = list(dict.fromkeys(list(ALWAYS_HIDDEN) + [str(p) for p in hide]))
    binds = [{"source": str(private), "target": str(private), "writable": True}]
    binds += [{"source": str(p), "target": str(p), "writable": True} for p in writable]
    binds += [{"source": str(p), "target": str(p), "writable": False}
              for p in list(readable) + _hidden_needs(tuple(hidden))]
    limits = {"core": 0, "fsize": 16 << 30, "nofile": 4096, "as": memory_limit}
    return {"binds": binds, "hide": hidden, "limits": limits}


def _link_chain(path: str) -> list[str]:
    """`path` and every symlink it goes through, each as written (a venv's
    python -> python3.11 -> /usr/bin/python3.11): the worker must find each."""
    chain, seen = [], set()
    current = os.path.abspath(path)
    while current not in seen:
        seen.add(current)
        chain.append(current)
        parent = os.path.dirname(current)
        if os.path.realpath(parent) != parent:  # a link in a parent directory: its own chain
            chain.extend(_link_chain(parent))
        if not os.path.islink(current):
            break
        current = os.path.join(parent, os.readlink(current))
        current = os.path.abspath(current)
    chain.append(os.path.realpath(path))
    return chain


@lru_cache(maxsize=1)
def runtime_paths() -> tuple[str, ...]:
    """What a worker's interpreter reads to run: the executable and the links
    to it, the prefixes, every sys.path entry, this package, torch, the shared
    libraries this process has loaded (torch's CUDA libraries among them), the
    library path and the compilers a build calls. Each as an absolute path
    (and its resolved one); duplicates and nested paths are not removed here."""
    import importlib.util
    import shutil

    found = _link_chain(sys.executable)
    found += [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, PACKAGE_ROOT]
    found += [p for p in sys.path if p and os.path.isabs(p)]
    spec = importlib.util.find_spec("torch")
    if spec and spec.origin:
        found.append(os.path.dirname(spec.origin))
    found += _mapped_directories()
    for variable in ("LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "CPATH", "LIBRARY_PATH"):
        found += [p for p in os.environ.get(variable, "").split(os.pathsep) if os.path.isabs(p)]
    for tool in (os.environ.get("CXX"), os.environ.get("CC"), "c++", "cc", "g++", "gcc", "nvcc", "ninja"):
        where = tool and shutil.which(tool)
        if where:
            found += [os.path.dirname(p) for p in _link_chain(where)]
    out: list[str] = []
    for p in found:
        for q in (os.path.abspath(p), os.path.realpath(p)):
            if q not in out and os.path.exists(q):
                out.append(q)
    return tuple(out)


def _mapped_directories() -> list[str]:
    """The directories of the code this process has mapped (its shared
    libraries: executable mappings only, never a data file it reads)."""
    try:
        with open("/proc/self/maps") as f:
            fields = [line.rstrip("\n").split(None, 5) for line in f]
    except OSError:
        return []
    return sorted({os.path.dirname(f[5]) for f in fields
                   if len(f) == 6 and "x" in f[1] and f[5].startswith("/") and not f[5].endswith(" (deleted)")})


@lru_cache(maxsize=16)
def _hidden_needs(hidden: tuple[str, ...]) -> list[Path]:
    """The runtime paths that lie under a hidden place, outermost only. A
    hidden place itself is never bound back whole (its other contents stay
    hidden): only what lies inside it."""
    roots = [os.path.realpath(h) for h in hidden] + list(hidden)
    inside = [p for p in runtime_paths()
              if any(p != r and p.startswith(r.rstrip("/") + "/") for r in roots)
              and not any(part.startswith(SCRATCH_PREFIXES) for part in Path(p).parts)]
    outermost = [p for p in inside if not any(q != p and p.startswith(q.rstrip("/") + "/") for q in inside)]
    return [Path(p) for p in sorted(set(outermost))]
