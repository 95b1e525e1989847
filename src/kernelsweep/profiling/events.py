"""Turn torch.profiler events into per-forward operator times without double
counting.

Each operator contributes only its *self* time: on CPU, its wall time minus
that of the operators it called (`self_cpu_time_total`); on CUDA, the time of
the kernels it launched itself (`self_device_time_total`; older releases call
it `self_cuda_time_total`). So `aten::linear` -> `aten::addmm` counts the GEMM
once, under addmm, and the self times add up to the total.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Iterable

from torch.autograd import DeviceType

MAX_NAME_CHARS = 160  # templated CUDA kernel names can run to kilobytes

# Kineto activity kinds (FunctionEvent.activity_type, absent in older releases).
_CPU_OP = "cpu_op"
_KERNEL = "kernel"
_COPY_KINDS = ("gpu_memcpy", "gpu_memset")


def _kind(event) -> str | None:
    return getattr(event, "activity_type", None)


def _is_operator(event) -> bool:
    """A PyTorch operator on the host: not a user annotation (record_function),
    not a CUDA runtime/driver call, not an async event."""
    if event.device_type != DeviceType.CPU or event.is_async or getattr(event, "is_user_annotation", False):
        return False
    kind = _kind(event)
    if kind is not None:
        return kind == _CPU_OP
    return not event.name.startswith(("cuda", "cu", "[memory]"))


def _device_activity(event) -> str | None:
    """'kernel', 'copy' or None (not a device activity, or an annotation)."""
    if event.device_type == DeviceType.CPU or getattr(event, "is_user_annotation", False):
        return None
    kind = _kind(event)
    if kind is None:  # older torch: tell copies from kernels by name
        return "copy" if event.name.startswith(("Memcpy", "Memset")) else "kernel"
    if kind == _KERNEL:
        return "kernel"
    return "copy" if kind in _COPY_KINDS else None  # annotations, overhead, ...


def _self_device_us(event) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total"):  # newer name first
        if hasattr(event, attr):
            return float(getattr(event, attr))
    raise RuntimeError("this torch release exposes neither self_device_time_total nor self_cuda_time_total")


def _device_us(event) -> float:
    return float(event.time_range.elapsed_us())


def _is_top_level(event) -> bool:
    parent = event.cpu_parent
    while parent is not None:
        if _is_operator(parent):
            return False
        parent = parent.cpu_parent
    return True


def _ranked(times: dict[str, float], calls: dict[str, int], forwards: int) -> list[dict[str, Any]]:
    total = sum(times.values())
    rows = [
        {"name": name[:MAX_NAME_CHARS], "self_time_us": t / forwards, "calls": calls[name] / forwards,
         "share": (t / total) if total > 0 else 0.0}
        for name, t in times.items()
    ]
    rows.sort(key=lambda r: (-r["self_time_us"], r["name"]))
    return rows


def analyse(events: Iterable, device: str, forwards: int) -> dict[str, Any]:
    """Per-forward operator self times (all operators, largest first), device
    kernels (CUDA), and the kernel count."""
    events = list(events)
    op_time: dict[str, float] = defaultdict(float)
    op_calls: dict[str, int] = defaultdict(int)
    top_level_ops = 0
    for e in events:
        if not _is_operator(e):
            continue
        op_time[e.name] += e.self_cpu_time_total if device == "cpu" else _self_device_us(e)
        op_calls[e.name] += 1
        top_level_ops += _is_top_level(e)

    result: dict[str, Any] = {"forwards": forwards}
    if device == "cpu":
        result.update(
            time_basis="self CPU time per operator (self_cpu_time_total)",
            total_self_time_us=sum(op_time.values()) / forwards,
            operators=_ranked(op_time, op_calls, forwards),
            kernels=[],
            kernel_count=top_level_ops / forwards,
            kernel_count_basis="aten operators called directly by forward (nested calls not counted)",
            copy_count=0,
        )
        return result

    kernel_time: dict[str, float] = defaultdict(float)
    kernel_calls: dict[str, int] = defaultdict(int)
    device_total = 0.0
    copies = 0
    for e in events:
        activity = _device_activity(e)
        if activity is None:
            continue
        device_total += _device_us(e)
        if activity == "copy":
            copies += 1
        else:
            kernel_time[e.name] += _device_us(e)
            kernel_calls[e.name] += 1
    # Device work no operator claimed (e.g. launched from outside any op).
    unattributed = device_total - sum(op_time.values())
    if unattributed > 1e-3 * max(device_total, 1e-9):
        op_time["(not attributed to an operator)"] += unattributed
        op_calls["(not attributed to an operator)"] += 0
    op_time = {k: v for k, v in op_time.items() if v > 0}
    result.update(
        time_basis="self device time per operator (kernels it launched itself: self_device_time_total)",
        total_self_time_us=device_total / forwards,
        operators=_ranked(op_time, op_calls, forwards),
        kernels=_ranked(kernel_time, kernel_calls, forwards),
        kernel_count=sum(kernel_calls.values()) / forwards,
        kernel_count_basis="CUDA kernels launched per forward (memcpy/memset not counted)",
        copy_count=copies / forwards,
    )
    return result
