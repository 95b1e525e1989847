"""run(path): the agent's own script in a worker process, confined as the
evaluator confines candidate code (kernelsweep.evaluator.confine: its own
namespaces, the filesystem read-only but for the workspace, the cell's other
files, /tmp and the build cache hidden, no network, every process it starts
dying with it).

The worker starts in its own process group (kernelsweep.runtime.process_group) in the
workspace, with a hard wall-clock limit after which the whole group is killed,
an environment without the pipeline's variables, the workspace as HOME and
extension build folder, and output kept to a bounded tail. Timing discipline:
the caller holds the study's device slot around it (kernelsweep.agent.tools)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.evaluator import confine
from kernelsweep.runtime.process_group import describe_exit, read_tail, run_in_group

KEPT_ENV = ("PATH", "LANG", "LC_ALL", "LD_LIBRARY_PATH", "TORCH_CUDA_ARCH_LIST", "CC", "CXX")
# Device and threading settings pass through, among them the machine's safety switches
# (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS, TORCH_SYMM_MEM_DISABLE_MULTICAST).
KEPT_PREFIXES = ("CUDA_", "NVIDIA_", "NCCL_", "NVSHMEM_", "TORCH_SYMM_MEM_", "OMP_", "MKL_")
LOG_NAME = ".run-output.log"
# Runs first in the worker: the kernel SIGKILLs it when the agent's process dies
# (a killed job must not leave the agent's script running), then the script runs as __main__.
PRELUDE = (
    "import ctypes, runpy, signal, sys\n"
    "try:\n    ctypes.CDLL(None).prctl(1, signal.SIGKILL)\nexcept Exception:\n    pass\n"
    "script = sys.argv[1]; sys.argv = sys.argv[1:]; sys.path.insert(0, '.')\n"
    "runpy.run_path(script, run_name='__main__')\n"
)


@dataclass
class ScriptRun:
    returncode: int | None
    timed_out: bool
    wall_s: float
    output: str  # the bounded tail of stdout and stderr

    def describe(self, timeout_s: float) -> str:
        if self.timed_out:
            status = f"killed at the {timeout_s:g} s limit"
        else:
            status = describe_exit(self.returncode)
        return f"{status} after {self.wall_s:.1f} s\n--- output (tail) ---\n{self.output.rstrip() or '(none)'}"


def run_script(workspace: Path, script: Path, timeout_s: float, output_chars: int,
               env_extra: dict[str, str] | None = None) -> ScriptRun:
    env = {k: v for k, v in os.environ.items() if k in KEPT_ENV or k.startswith(KEPT_PREFIXES)}
    env.update(HOME=str(workspace), TMPDIR=str(workspace / ".tmp"),
               TORCH_EXTENSIONS_DIR=str(workspace / ".torch_extensions"), PYTHONDONTWRITEBYTECODE="1")
    env.update(env_extra or {})
    (workspace / ".tmp").mkdir(exist_ok=True)
    log = workspace / LOG_NAME
    # -E -s: no PYTHON* variables, no user site; the workspace is the cwd and on sys.path.
    argv = [sys.executable, "-E", "-s", "-c", PRELUDE, str(script)]
    if confine.mechanism() == confine.NAMESPACES:
        spec = dict(confine.worker_spec(private=workspace, readable=[], writable=[], hide=[workspace.parent],
                                        memory_limit=None), cwd=str(workspace))
        argv = confine.launcher_argv(spec, argv)
    with open(log, "wb") as out:
        done = run_in_group(argv, timeout_s, stdout=out, stderr=out, cwd=workspace, env=env)
    output = read_tail(log, output_chars)
    log.unlink(missing_ok=True)
    return ScriptRun(done.returncode, done.timed_out, done.wall_s, output)
