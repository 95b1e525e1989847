"""The profile record (`{results}/profile/{device}/{task}.json`) built from the
child's raw measurements."""

from __future__ import annotations

from typing import Any

from kernelsweep.profiling import roofline

SCHEMA = "kernelsweep/profile/1"
TOP_N = 10

FLOP_COUNTER = "torch.utils.flop_counter.FlopCounterMode (matrix products, convolutions, attention)"
BYTES_BASIS = ("compulsory = distinct inputs + parameters + buffers + outputs, each moved once; "
               "per_op_sum = inputs + outputs of every non-view operator (unfused traffic)")
INTENSITY_BASIS = "(counted FLOPs + elementwise estimate) / compulsory bytes"


def error_record(identity: dict[str, Any], error_type: str, message: str, phase: str | None, log: str) -> dict[str, Any]:
    return {"schema": SCHEMA, "status": "error", **identity,
            "error": {"type": error_type, "phase": phase, "message": message, "log": log}}


def build(identity: dict[str, Any], raw: dict[str, Any], peak_flops: float | None = None,
          peak_bandwidth: float | None = None) -> dict[str, Any]:
    prof, flops, traffic = raw["profile"], raw["flops"], raw["traffic"]
    device = identity["device"]

    top = prof["operators"][:TOP_N]
    all_flops = flops["total"] + traffic["elementwise_flops"]
    precision_key, precision_why = roofline.flop_precision(device, identity["precision"], raw.get("tf32"), flops["by_op"])
    peaks = roofline.select_peaks(device, raw["device_name"], precision_key, raw.get("cpu_threads"),
                                  peak_flops, peak_bandwidth)
    bound = roofline.verdict(all_flops, traffic["compulsory"], peaks)
    return {
        "schema": SCHEMA,
        "status": "ok",
        **identity,
        "device_name": raw["device_name"],
        "torch": raw["torch"],
        "cuda": raw["cuda"],
        "python": raw["python"],
        "time_per_forward_ms": raw["time_per_forward_ms"],
        "phase_s": raw.get("phase_s"),
        "time_basis": prof["time_basis"],
        "total_self_time_us": prof["total_self_time_us"],
        "top_operators": top,
        "top_operators_share": sum(r["share"] for r in top),
        "operator_count": len(prof["operators"]),
        "top_kernels": prof["kernels"][:TOP_N],
        "kernel_count": prof["kernel_count"],
        "kernel_count_basis": prof["kernel_count_basis"],
        "copy_count": prof["copy_count"],
        "flops": {"total": flops["total"], "by_op": flops["by_op"], "counter": FLOP_COUNTER,
                  "elementwise_estimate": traffic["elementwise_flops"]},
        "bytes": {"compulsory": traffic["compulsory"], "per_op_sum": traffic["per_op_sum"], "basis": BYTES_BASIS},
        "arithmetic_intensity": bound["arithmetic_intensity"],
        "arithmetic_intensity_basis": INTENSITY_BASIS,
        "roofline": {
            "verdict": bound["verdict"],
            "reason": bound.get("reason"),
            "ridge_point": bound["ridge_point"],
            "peak_precision": precision_key,
            "peak_precision_reason": precision_why,
            "peaks": peaks,
            "unfused_intensity": all_flops / traffic["per_op_sum"] if traffic["per_op_sum"] else None,
        },
        "error": None,
    }
