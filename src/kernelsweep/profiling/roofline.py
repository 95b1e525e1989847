"""Arithmetic intensity and the memory- or compute-bound verdict.

ridge point = peak FLOP/s / peak bytes/s (FLOP per byte). A forward whose
intensity is below the ridge cannot keep the arithmetic units busy even if
every byte moves at peak bandwidth: it is memory-bound. The peaks come from the
device table, from the user, or (CPU) from a labelled estimate; without peaks
the verdict is "unknown" and the record says why.
"""

from __future__ import annotations

from typing import Any

from kernelsweep.profiling import device_peaks

MEMORY_BOUND = "memory-bound"
COMPUTE_BOUND = "compute-bound"
UNKNOWN = "unknown"

_TF32_MATMUL_OPS = ("aten.mm", "aten.addmm", "aten.bmm", "aten.baddbmm", "aten.matmul")


def flop_precision(device: str, precision: str, tf32: dict[str, bool] | None, flops_by_op: dict[str, int]) -> tuple[str, str]:
    """Which peak applies, and why. fp32 on CUDA runs on TF32 tensor cores when
    PyTorch allows it for the ops that carry most of the FLOPs (cuDNN
    convolutions allow it by default, matmuls do not)."""
    if device != "cuda" or precision != "fp32" or not tf32:
        return precision, f"{precision} arithmetic"
    matmul = sum(n for op, n in flops_by_op.items() if op.startswith(_TF32_MATMUL_OPS))
    conv = sum(n for op, n in flops_by_op.items() if "convolution" in op)
    eligible = (matmul if tf32.get("matmul") else 0) + (conv if tf32.get("cudnn") else 0)
    total = sum(flops_by_op.values())
    if total and eligible * 2 > total:
        return "tf32", "fp32 inputs, but most FLOPs run on TF32 tensor cores (torch allow_tf32 settings)"
    return "fp32", "fp32 arithmetic (TF32 not enabled for the ops carrying the FLOPs)"


def select_peaks(device: str, device_name: str, precision_key: str, cpu_threads: int | None,
                 peak_flops: float | None = None, peak_bandwidth: float | None = None) -> dict[str, Any]:
    """{flops, bandwidth, basis, source, measured} or {flops: None, ..., reason}."""
    entry = device_peaks.cpu_estimate(cpu_threads) if device == "cpu" else device_peaks.lookup_gpu(device_name)
    table_flops = entry.flops.get(precision_key) if entry else None
    flops = peak_flops if peak_flops is not None else table_flops
    bandwidth = peak_bandwidth if peak_bandwidth is not None else (entry.bandwidth if entry else None)

    overridden = [name for name, v in (("FLOP/s", peak_flops), ("bandwidth", peak_bandwidth)) if v is not None]
    if entry is None:
        basis, source = "override", "command line (--peak-flops/--peak-bandwidth)"
    elif device == "cpu":
        basis, source = "estimate", entry.source
    else:
        basis, source = "datasheet", entry.source
    if overridden and entry is not None:
        basis = "override" if len(overridden) == 2 else f"{basis}+override"
        source = f"{source}; {' and '.join(overridden)} from the command line"

    reason = None
    if flops is None or bandwidth is None:
        if entry is None:
            missing = [n for n, v in (("--peak-flops", flops), ("--peak-bandwidth", bandwidth)) if v is None]
            reason = (f"no peak figures for device {device_name!r} (not in kernelsweep.profiling.device_peaks); "
                      f"pass {' and '.join(missing)}")
        else:
            reason = f"{entry.key} has no {precision_key} peak in the device table; pass --peak-flops"
        return {"flops": flops, "bandwidth": bandwidth, "precision": precision_key, "basis": None,
                "source": None, "reason": reason}
    return {
        "flops": flops, "bandwidth": bandwidth, "precision": precision_key, "basis": basis, "source": source,
        "measured": dict(entry.measured) if entry and entry.measured else None,
    }


def verdict(total_flops: float, compulsory_bytes: int, peaks: dict[str, Any]) -> dict[str, Any]:
    intensity = total_flops / compulsory_bytes if compulsory_bytes > 0 else None
    out: dict[str, Any] = {"arithmetic_intensity": intensity, "ridge_point": None, "verdict": UNKNOWN}
    if intensity is None:
        out["reason"] = "the forward moves no tensor bytes, so intensity is undefined"
        return out
    if peaks.get("reason"):
        out["reason"] = peaks["reason"]
        return out
    ridge = peaks["flops"] / peaks["bandwidth"]
    out["ridge_point"] = ridge
    bound = MEMORY_BOUND if intensity < ridge else COMPUTE_BOUND
    out["verdict"] = bound
    out["reason"] = (f"intensity {intensity:.3g} FLOP/byte is {'below' if bound == MEMORY_BOUND else 'at or above'} "
                     f"the ridge point {ridge:.3g} FLOP/byte ({peaks['basis']} peaks)")
    return out


def bound_time_s(total_flops: float, compulsory_bytes: int, peaks: dict[str, Any]) -> dict[str, Any]:
    """The roofline's lower bound on one forward's time ("speed of light"): every
    FLOP at peak FLOP/s and every compulsory byte at peak bandwidth, overlapped,
    so max(FLOPs / peak FLOP/s, bytes / peak bytes/s). FLOPs and bytes are the ones
    the intensity uses (counted + elementwise estimate; compulsory traffic).

    {"seconds", "limit": "compute"|"memory", "reason"}; seconds is None (with the
    reason) when the peaks are unknown or nothing was counted."""
    if peaks.get("reason") or not peaks.get("flops") or not peaks.get("bandwidth"):
        return {"seconds": None, "limit": None, "reason": peaks.get("reason") or "no device peaks"}
    compute = (total_flops or 0) / peaks["flops"]
    memory = (compulsory_bytes or 0) / peaks["bandwidth"]
    if compute <= 0 and memory <= 0:
        return {"seconds": None, "limit": None, "reason": "the forward has no counted FLOPs or bytes"}
    limit = "compute" if compute >= memory else "memory"
    return {"seconds": max(compute, memory), "limit": limit, "reason": None}


def profile_bound_time_s(record: dict[str, Any]) -> dict[str, Any]:
    """bound_time_s of a profile record (`profile/{device}/{task}.json`, kernelsweep.profiling.record)."""
    if not isinstance(record, dict) or record.get("status") != "ok":
        return {"seconds": None, "limit": None, "reason": "no usable profile"}
    flops = record.get("flops") or {}
    total = (flops.get("total") or 0) + (flops.get("elementwise_estimate") or 0)
    peaks = (record.get("roofline") or {}).get("peaks") or {}
    out = bound_time_s(total, (record.get("bytes") or {}).get("compulsory") or 0, peaks)
    out.update(flops=total, bytes=(record.get("bytes") or {}).get("compulsory"), peak_flops=peaks.get("flops"),
               peak_bandwidth=peaks.get("bandwidth"), peak_precision=peaks.get("precision"),
               peak_basis=peaks.get("basis"), device_name=record.get("device_name"))
    return out
