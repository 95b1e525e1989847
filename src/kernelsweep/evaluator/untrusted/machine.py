"""The worker's device and host: pick and initialise the device, synchronize,
set host limits, and describe the machine for the record."""

from __future__ import annotations

import os
import re
import resource
from pathlib import Path
from typing import Any

import torch

# Captured at import: under the late claim the candidate's worker sets its
# device up after the candidate's import (untrusted/candidate.take_device).
_cuda_available = torch.cuda.is_available
_set_device = torch.cuda.set_device
_zeros = torch.zeros
_Device = torch.device


def resolve_device(name: str) -> torch.device:
    if name == "cuda":
        if not _cuda_available():
            raise RuntimeError("device cuda requested but torch sees no CUDA device")
        _set_device(0)
        _zeros(1, device="cuda")  # create the context now, not inside a measurement
        return _Device("cuda", 0)
    return _Device("cpu")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _cuda_synchronize()


_cuda_synchronize = torch.cuda.synchronize


def set_limits(device: str, memory_limit: int | None) -> None:
    """No core files (a segfaulting candidate must not write gigabytes) and, on
    the CPU target, a cap on address space so a runaway allocation fails as
    an allocation error instead of invoking the kernel's OOM killer."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if device == "cpu" and memory_limit:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


def device_info(device: torch.device) -> dict[str, Any]:
    import platform

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update({
            "device_name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_bytes": props.total_memory,
            "multiprocessors": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "driver": _nvidia_driver(),
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        })
        clock = getattr(props, "memory_clock_rate", None)  # kHz
        width = getattr(props, "memory_bus_width", None)  # bits
        if clock and width:
            info["peak_bytes_per_s"] = 2.0 * clock * 1e3 * width / 8.0
    else:
        caches = _cpu_cache_bytes()
        info.update({"device_name": _cpu_name(), "driver": None, "cores": os.cpu_count(),
                     "l2_bytes": caches.get(2), "llc_bytes": max(caches.values()) if caches else None})
    return info


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([\d.]+)", text)
        if m:
            return m.group(1)
    except OSError:
        pass
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def _cpu_cache_bytes() -> dict[int, int]:
    """Cache sizes by level (1, 2, 3) of the first CPU, from sysfs."""
    sizes: dict[int, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in base.glob("index*"):
            level = int((index / "level").read_text().strip())
            size = (index / "size").read_text().strip()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
            sizes[level] = max(sizes.get(level, 0), int(size.rstrip("KMG")) * mult)
    except (OSError, ValueError):
        pass
    return sizes
