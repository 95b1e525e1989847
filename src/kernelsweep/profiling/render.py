"""Plain-text summary of a profile record for the guided prompt."""

from __future__ import annotations

from typing import Any

MAX_PROMPT_OPS = 8


def si(value: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.3g} {unit}"


def _calls(n: float) -> str:
    n = round(n, 2)
    return f"{n:g} call" + ("" if n == 1 else "s")


def render_for_prompt(profile: dict[str, Any]) -> str:
    if profile.get("status") != "ok":
        err = profile.get("error") or {}
        return f"Reference profile unavailable: {err.get('message', 'unknown error')}"
    p = profile
    lines = [f"Reference profile on {p['device']} ({p['device_name']}, {p['precision']}, torch {p['torch']}): "
             f"{p['time_per_forward_ms']['median']:.4g} ms per forward (median of {p['time_per_forward_ms']['n']})."]
    basis = "device" if p["device"] == "cuda" else "CPU"
    lines.append(f"Top operators by self {basis} time (share of {p['total_self_time_us']:.4g} us per forward):")
    for op in p["top_operators"][:MAX_PROMPT_OPS]:
        lines.append(f"  {op['share'] * 100:5.1f}%  {op['name']}  ({_calls(op['calls'])})")
    if p["top_kernels"]:
        lines.append("Top CUDA kernels:")
        for k in p["top_kernels"][:3]:
            lines.append(f"  {k['share'] * 100:5.1f}%  {k['name'][:100]}")
    count = p["kernel_count"]
    noun = "CUDA kernels launched" if p["device"] == "cuda" else "aten operators called by forward"
    lines.append(f"Per forward: {count:g} {noun}.")
    f, b = p["flops"], p["bytes"]
    lines.append(f"FLOPs: {si(f['total'], 'FLOP')} in matmul/conv/attention"
                 f" + {si(f['elementwise_estimate'], 'FLOP')} elementwise (estimate).")
    lines.append(f"Bytes: {si(b['compulsory'], 'B')} compulsory (inputs, weights, outputs once);"
                 f" {si(b['per_op_sum'], 'B')} if every operator reads and writes memory.")
    r = p["roofline"]
    intensity = p["arithmetic_intensity"]
    if r["verdict"] == "unknown":
        shown = "n/a" if intensity is None else f"{intensity:.3g} FLOP/byte"
        lines.append(f"Arithmetic intensity: {shown}. Bound: unknown ({r['reason']}).")
    else:
        peaks = r["peaks"]
        lines.append(f"Arithmetic intensity: {intensity:.3g} FLOP/byte; ridge point {r['ridge_point']:.3g} FLOP/byte "
                     f"({peaks['basis']} peaks: {si(peaks['flops'], 'FLOP/s')} {r['peak_precision']}, "
                     f"{si(peaks['bandwidth'], 'B/s')}).")
        lines.append(f"Bound: {r['verdict']}.")
    return "\n".join(lines)
