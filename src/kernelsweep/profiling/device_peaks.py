"""Peak FLOP/s and memory bandwidth per device, for roofline verdicts.

GPU figures are dense (no structured sparsity) peaks from NVIDIA's public
datasheets and architecture whitepapers; half-precision figures assume fp32
accumulation, which is what PyTorch uses. They are upper bounds: real kernels
reach a fraction of them. A device that is not in the table gets no peaks (the
caller reports "unknown") unless the user passes explicit values; a CPU gets a
generic estimate that is labelled as such.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

TERA = 1e12
GIGA = 1e9

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


@dataclass(frozen=True)
class DevicePeaks:
    key: str                        # the name substring that matched
    flops: dict[str, float | None]  # precision -> FLOP/s (None: no hardware support)
    bandwidth: float                # bytes/s, device memory
    source: str
    measured: dict[str, dict] = field(default_factory=dict)  # attainable figures seen on real runs


def _gpu(key, fp32, tf32, fp16, bf16, bandwidth_tb, source, measured=None) -> DevicePeaks:
    flops = {"fp32": fp32, "tf32": tf32, "fp16": fp16, "bf16": bf16}
    return DevicePeaks(key=key, flops={p: (v * TERA if v else None) for p, v in flops.items()},
                       bandwidth=bandwidth_tb * TERA, source=source, measured=measured or {})


_H200_MEASURED = {
    "bandwidth": {"value": 4.3 * TERA, "how": "device-to-device copy on this project's H200"},
    "bf16": {"value": 790 * TERA, "how": "large bf16 matmul on this project's H200"},
}

# Matched against the device name as a whole word (so "A10" does not match
# "A100" and "L4" does not match "L40"); the longest matching key wins.
GPU_PEAKS: tuple[DevicePeaks, ...] = (
    _gpu("H200 NVL", 60, 417.5, 835.5, 835.5, 4.8, "NVIDIA H200 NVL datasheet"),
    _gpu("H200", 67, 494.7, 989.5, 989.5, 4.8, "NVIDIA H200 SXM datasheet", _H200_MEASURED),
    _gpu("H100 NVL", 60, 417.5, 835.5, 835.5, 3.9, "NVIDIA H100 NVL datasheet"),
    _gpu("H100 PCIe", 51, 378, 756, 756, 2.0, "NVIDIA H100 PCIe datasheet"),
    _gpu("H100", 67, 494.7, 989.4, 989.4, 3.35, "NVIDIA H100 SXM datasheet"),
    _gpu("A100-SXM4-80GB", 19.5, 156, 312, 312, 2.039, "NVIDIA A100 datasheet (80GB SXM)"),
    _gpu("A100 80GB PCIe", 19.5, 156, 312, 312, 1.935, "NVIDIA A100 datasheet (80GB PCIe)"),
    _gpu("A100", 19.5, 156, 312, 312, 1.555, "NVIDIA A100 datasheet (40GB)"),
    _gpu("A10", 31.2, 62.5, 125, 125, 0.6, "NVIDIA A10 datasheet"),
    _gpu("L40S", 91.6, 183, 362, 362, 0.864, "NVIDIA L40S datasheet"),
    _gpu("L40", 90.5, 90.5, 181, 181, 0.864, "NVIDIA L40 datasheet"),
    _gpu("L4", 30.3, 60, 121, 121, 0.3, "NVIDIA L4 datasheet"),
    _gpu("V100S", 16.4, None, 130, None, 1.134, "NVIDIA V100S datasheet"),
    _gpu("V100-SXM2", 15.7, None, 125, None, 0.9, "NVIDIA V100 datasheet (SXM2)"),
    _gpu("V100", 14, None, 112, None, 0.9, "NVIDIA V100 datasheet (PCIe)"),
    _gpu("T4", 8.1, None, 65, None, 0.32, "NVIDIA T4 datasheet"),
    _gpu("RTX 4090", 82.6, 82.6, 165.2, 165.2, 1.008, "NVIDIA Ada (AD102) whitepaper, RTX 4090"),
    _gpu("RTX 3090", 35.6, 35.6, 71, 71, 0.936, "NVIDIA Ampere (GA102) whitepaper, RTX 3090"),
)


def _matches(key: str, name: str) -> bool:
    return re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", name, re.IGNORECASE) is not None


def lookup_gpu(device_name: str) -> DevicePeaks | None:
    """The table entry for a GPU name such as 'NVIDIA H100 80GB HBM3', or None."""
    hits = [p for p in GPU_PEAKS if _matches(p.key, device_name)]
    return max(hits, key=lambda p: len(p.key)) if hits else None


# --- CPU -------------------------------------------------------------------

_CPU_ASSUMED_GHZ = 2.5
_CPU_BYTES_PER_S_PER_THREAD = 10 * GIGA  # a core streams roughly 10 GB/s from DRAM
_CPU_BYTES_PER_S_CAP = 100 * GIGA        # a typical socket's DRAM bandwidth


def _cpuinfo() -> dict[str, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return {}
    info: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            info.setdefault(k.strip(), v.strip())
    return info


def cpu_name() -> str:
    import platform
    return _cpuinfo().get("model name") or platform.processor() or platform.machine() or "unknown CPU"


def _cpu_ghz() -> tuple[float, str]:
    try:
        khz = int(Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq").read_text())
        return khz / 1e6, "cpufreq maximum"
    except (OSError, ValueError):
        pass
    try:
        return float(_cpuinfo()["cpu MHz"]) / 1e3, "/proc/cpuinfo current clock"
    except (KeyError, ValueError):
        return _CPU_ASSUMED_GHZ, f"assumed {_CPU_ASSUMED_GHZ} GHz"


def cpu_estimate(threads: int | None = None) -> DevicePeaks:
    """A rough roofline for this CPU: threads x clock x fp32 FLOP/cycle of the widest
    FMA unit the flags advertise (two FMA pipes assumed), and ~10 GB/s of DRAM
    bandwidth per thread capped at 100 GB/s. An estimate, never a measurement."""
    threads = max(1, threads or os.cpu_count() or 1)
    flags = set(_cpuinfo().get("flags", "").split())
    if "avx512f" in flags:
        per_cycle, isa = 64, "AVX-512"
    elif "avx2" in flags and "fma" in flags:
        per_cycle, isa = 32, "AVX2+FMA"
    elif flags:
        per_cycle, isa = 8, "SSE"
    else:
        per_cycle, isa = 16, "unknown ISA (assumed 16 FLOP/cycle)"
    ghz, clock_how = _cpu_ghz()
    flops = threads * ghz * 1e9 * per_cycle
    bandwidth = min(threads * _CPU_BYTES_PER_S_PER_THREAD, _CPU_BYTES_PER_S_CAP)
    source = (f"generic CPU estimate: {threads} threads x {ghz:.2f} GHz ({clock_how}) x "
              f"{per_cycle} fp32 FLOP/cycle ({isa}); bandwidth assumed "
              f"{_CPU_BYTES_PER_S_PER_THREAD / GIGA:.0f} GB/s per thread, at most "
              f"{_CPU_BYTES_PER_S_CAP / GIGA:.0f} GB/s")
    # Half precision on CPU is usually converted to fp32 for the arithmetic.
    return DevicePeaks(key="cpu", flops={p: flops for p in PRECISIONS}, bandwidth=bandwidth, source=source)


def parse_quantity(text: str) -> float:
    """'4.8e12', '4.8T', '900G' -> float (SI suffixes K, M, G, T, P)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtTpP]?)\s*", text)
    if not m:
        raise ValueError(f"not a number: {text!r} (examples: 4.8e12, 4.8T, 900G)")
    scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "p": 1e15}[m.group(2).lower()]
    value = float(m.group(1)) * scale
    if value <= 0:
        raise ValueError(f"must be positive: {text!r}")
    return value
