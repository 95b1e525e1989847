"""FLOPs and bytes of one forward.

FLOPs come from torch.utils.flop_counter.FlopCounterMode, which counts matrix
products, convolutions and attention only. Elementwise and reduction work is
estimated separately (one FLOP per output element of a pointwise op, one per
input element of a reduction) so that elementwise-only models do not read as
zero work.

Bytes are given two ways:
- compulsory: every distinct tensor the forward must read or write at least
  once: inputs, parameters, buffers and outputs. A perfectly fused kernel moves
  about this much; the roofline verdict uses it.
- per_op_sum: for every non-view operator, the bytes of its tensor inputs plus
  its outputs: what the unfused reference moves if nothing stays in cache.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

# Factory ops allocate without touching memory.
_ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def tensors_in(obj: Any) -> Iterable[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for item in obj:
            yield from tensors_in(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from tensors_in(item)


def tensor_bytes(t: torch.Tensor) -> int:
    """Bytes a kernel must touch for t: its elements, but no more than its
    storage (a broadcast view of a bias reads the bias once)."""
    logical = t.numel() * t.element_size()
    try:
        return min(logical, t.untyped_storage().nbytes())
    except (RuntimeError, NotImplementedError):  # tensors without storage
        return logical


def compulsory_bytes(groups: Iterable[Iterable[torch.Tensor]]) -> int:
    seen: set[tuple[int, int]] = set()
    total = 0
    for group in groups:
        for t in group:
            try:
                address = t.data_ptr()
            except RuntimeError:  # no storage (e.g. sparse): count it on its own
                address = id(t)
            key = (address, tensor_bytes(t))
            if key not in seen:
                seen.add(key)
                total += key[1]
    return total


class _OperatorTraffic(TorchDispatchMode):
    def __init__(self, counted_by_flop_counter: set):
        super().__init__()
        self.counted = counted_by_flop_counter
        self.bytes = 0
        self.elementwise_flops = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func.overloadpacket
        if func.is_view or packet.__name__ in _ALLOCATIONS:
            return out
        inputs = list(tensors_in((args, kwargs)))
        outputs = list(tensors_in(out))
        self.bytes += sum(map(tensor_bytes, inputs)) + sum(map(tensor_bytes, outputs))
        if packet not in self.counted:
            if torch.Tag.pointwise in func.tags:
                self.elementwise_flops += max((t.numel() for t in outputs), default=0)
            elif torch.Tag.reduction in func.tags:
                self.elementwise_flops += max((t.numel() for t in inputs), default=0)
        return out


def count_flops(forward) -> dict[str, Any]:
    with FlopCounterMode(display=False) as counter:
        forward()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    return {"total": int(counter.get_total_flops()), "by_op": by_op}


def count_traffic(forward, model: torch.nn.Module, inputs) -> dict[str, Any]:
    counted = set(FlopCounterMode(display=False).flop_registry)  # the ops count_flops covers
    mode = _OperatorTraffic(counted)
    with mode:
        output = forward()
    compulsory = compulsory_bytes([tensors_in(inputs), model.parameters(), model.buffers(), tensors_in(output)])
    return {"compulsory": compulsory, "per_op_sum": mode.bytes, "elementwise_flops": mode.elementwise_flops}
