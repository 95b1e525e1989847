"""Parent-side device questions that must not touch CUDA in this process:
which CUDA architectures to build for, the environment a worker gets, and
(in a fresh process) whether the GPU still computes after a crash.
The devices' peak rates, for the roofline, are kernelsweep.profiling.device_peaks."""

from __future__ import annotations

import os
import shutil
import subprocess

from kernelsweep.evaluator import settings


def visible_gpu_capability() -> str | None:
    """Compute capability of the first visible GPU via nvidia-smi (no CUDA
    context in this process), or None when no GPU is visible."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return None
    tool = shutil.which("nvidia-smi")
    if not tool:
        return None
    try:
        out = subprocess.run([tool, "--query-gpu=compute_cap", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.stdout.splitlines() if line.strip()]
    if out.returncode != 0 or not lines:
        return None
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    index = 0
    if visible and visible.split(",")[0].strip().isdigit():
        index = int(visible.split(",")[0])
    return lines[index] if index < len(lines) else lines[0]


def resolve_cuda_arch(explicit: str | None) -> str:
    """TORCH_CUDA_ARCH_LIST for builds: the argument, else KERNELSWEEP_CUDA_ARCH,
    else TORCH_CUDA_ARCH_LIST, else the visible GPU's, else 9.0 (H100/H200).
    The compile step and the evaluation resolve it the same way, and it is part
    of the build key, so a mismatch rebuilds instead of loading a wrong binary."""
    for value in (explicit, os.environ.get("KERNELSWEEP_CUDA_ARCH"), os.environ.get("TORCH_CUDA_ARCH_LIST")):
        if value:
            return value
    return visible_gpu_capability() or settings.DEFAULT_CUDA_ARCH


# Caches in a candidate's build directory (worker_env), by environment variable.
CACHE_DIRS = {"CUPY_CACHE_DIR": "cupy", "NUMBA_CACHE_DIR": "numba", "XDG_CACHE_HOME": "cache", "HOME": "home"}


def worker_env(build_root: str, *, cuda_arch: str | None, hide_gpus: bool = False) -> dict[str, str | None]:
    """Environment overrides for a worker that may build or run a candidate;
    build_root is the candidate's own build directory, the only place the
    confined worker may write besides its private one. Every cache a library
    keeps under the home directory by default (CuPy's ~/.cupy, Numba's,
    ~/.cache, the CUDA driver's ~/.nv) goes there too: the home directory is
    read-only in the confinement, and a cache that cannot be written makes the
    candidate fail for the harness's reason, not its own. Creates the folders."""
    env: dict[str, str | None] = {
        "TRITON_CACHE_DIR": os.path.join(build_root, "triton"),
        # Builds the hooks do not see (a candidate calling torch internals) land here.
        "TORCH_EXTENSIONS_DIR": os.path.join(build_root, "torch_extensions"),
        **{name: os.path.join(build_root, folder) for name, folder in CACHE_DIRS.items()},
    }
    for name in CACHE_DIRS:
        os.makedirs(env[name], exist_ok=True)
    if cuda_arch:
        env["TORCH_CUDA_ARCH_LIST"] = cuda_arch
    if hide_gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def device_unusable(timeout_s: float = 60.0) -> str | None:
    """Can a fresh process still compute on the visible GPU? None when it can,
    else what went wrong. Asked after a candidate crashed, ran out of memory or
    hung, to tell a lost or broken GPU (a machine fault) from the candidate's fault."""
    import sys

    probe = "import torch; x = torch.ones(1024, device='cuda'); assert float(x.sum()) == 1024.0"
    try:
        done = subprocess.run([sys.executable, "-I", "-c", probe], capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return f"a one-line CUDA computation did not finish in {timeout_s:g} s"
    except OSError as exc:
        return f"the probe could not start: {exc}"
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.strip()]
        return lines[-1] if lines else f"exit status {done.returncode}"
    return None
