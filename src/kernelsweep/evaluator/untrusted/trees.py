"""Trees of tensors in a worker: map, copy, compare, flatten outputs, save
and load them, and tell whether an output aliases an input. Imported before
any candidate code runs, so the saved torch.save/torch.load are the real ones."""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable

import torch

_save = torch.save
_load = torch.load
_clone = torch.Tensor.clone  # the harness's copies never go through a method the candidate replaced


def copy(t: torch.Tensor) -> torch.Tensor:
    return _clone(t)


def map_tensors(obj: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(obj, torch.Tensor):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(map_tensors(o, fn) for o in obj)
    if isinstance(obj, dict):
        return {k: map_tensors(v, fn) for k, v in obj.items()}
    return obj


def tensors_in(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in tensors_in(o)]
    if isinstance(obj, dict):
        return [t for v in obj.values() for t in tensors_in(v)]
    return []


def to_device(obj: Any, device: torch.device) -> Any:
    return map_tensors(obj, lambda t: t.to(device))


def clone_tree(obj: Any) -> Any:
    return map_tensors(obj, copy)


def tree_nbytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_in(obj))


def float_elements(obj: Any) -> int:
    """The elements of the floating tensors in OBJ."""
    return sum(t.numel() for t in tensors_in(obj) if t.is_floating_point())


def same_values(a: Any, b: Any) -> bool:
    """Exact equality of two trees (NaN equals NaN), for mutation checks."""
    ta, tb = tensors_in(a), tensors_in(b)
    if len(ta) != len(tb):
        return False
    for x, y in zip(ta, tb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if x.is_floating_point() or x.is_complex():
            eq = (x == y) | (torch.isnan(x) & torch.isnan(y))
            if not bool(eq.all()):
                return False
        elif not torch.equal(x, y):
            return False
    return True


def flatten_output(out: Any) -> tuple[str, list]:
    """A structure string and the leaves, so outputs of any nesting compare."""
    leaves: list = []
    return _walk(out, leaves), leaves


def _walk(o: Any, leaves: list) -> str:
    # Module-level, not a closure: a nested function that calls itself is a
    # reference cycle holding `leaves`, and the outputs in it outlived every
    # call until the cyclic collector ran (rarely, in a timing loop), so a task
    # with big outputs piled them up until the device's memory ran out.
    if isinstance(o, torch.Tensor):
        leaves.append(o)
        return "T"
    if isinstance(o, (list, tuple)):
        return f"{type(o).__name__}[{','.join(_walk(x, leaves) for x in o)}]"
    if isinstance(o, dict):
        return "dict[" + ",".join(f"{k}:{_walk(o[k], leaves)}" for k in sorted(o, key=str)) + "]"
    if o is None:
        return "None"
    if isinstance(o, (bool, int, float)):
        leaves.append(o)
        return type(o).__name__
    return f"other:{type(o).__name__}"


def plain(leaves: list) -> bool:
    """Plain dense tensors (or numbers): no subclass, no lazy wrapper."""
    return all(type(x) is torch.Tensor and x.layout == torch.strided and not x.is_meta
               for x in leaves if isinstance(x, torch.Tensor)) and \
        all(isinstance(x, (torch.Tensor, bool, int, float)) for x in leaves)


def portable_leaves(leaves: list) -> list:
    """Leaves as compact CPU tensors / numbers for torch.save (a view would
    otherwise drag its whole storage along). From a device, the copy to the
    host is already a compact tensor of its own: no second copy (4 GiB
    outputs are saved on every trial)."""
    return [(x.detach().contiguous().to("cpu") if x.device.type != "cpu" else x.detach().contiguous().clone())
            if isinstance(x, torch.Tensor) else x for x in leaves]


# A timed call's output is checked on this many elements per tensor at most:
# the same secret positions in both workers (a seed the parent sends only
# after the call), so a 512 MiB output costs a few MiB of file, not seconds.
# An output wrong on a fraction f of its elements escapes one check with
# probability (1 - f) ** SAMPLED_ELEMENTS (f = 1e-5: e^-10).
SAMPLED_ELEMENTS = 1 << 20


def sampled_output(structure: str, leaves: list, sample_seed: int) -> dict[str, Any]:
    """{"structure", "leaves"} as saved for a timed check: tensors larger than
    SAMPLED_ELEMENTS reduced to the elements at positions drawn from
    sample_seed; their shapes join the structure so a wrong shape still fails."""
    shapes, picked = [], []
    for i, x in enumerate(leaves):
        if isinstance(x, torch.Tensor) and x.numel() > SAMPLED_ELEMENTS:
            positions = torch.randint(x.numel(), (SAMPLED_ELEMENTS,),
                                      generator=torch.Generator().manual_seed(sample_seed + i))
            shapes.append(f"{i}:{tuple(x.shape)}")
            x = x.reshape(-1)[positions.to(x.device)]
        picked.append(x)
    suffix = f"|sampled {' '.join(shapes)}" if shapes else ""
    return {"structure": structure + suffix, "leaves": portable_leaves(picked)}


def save(obj: Any, path: str | os.PathLike) -> None:
    _save(obj, str(path))


def load(path: str | os.PathLike) -> Any:
    """Tensors as views of the file's private mapping: a state of billions of
    parameters is read once, by load_state_dict's copy, not first into memory
    and then copied again, with the device held."""
    return _load(str(path), map_location="cpu", weights_only=True, mmap=True)


def storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        st = t.untyped_storage()
        return (st.data_ptr(), st.data_ptr() + st.nbytes())
    except Exception:
        return None


def weight_digests(state: dict[str, Any]) -> dict[str, list]:
    """{name: [shape, dtype, digest of its bytes or None]} of a state dict's
    tensors: which weights two models share, told apart without moving the
    weights between processes (a 2 G-parameter state is 8.6 GB)."""
    digests: dict[str, list] = {}
    with torch.no_grad():
        for name, t in state.items():
            if not isinstance(t, torch.Tensor):
                continue
            try:
                data = t.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8).numpy()
                digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            except Exception:  # noqa: BLE001 - a meta tensor, a subclass: no bytes to compare
                digest = None
            digests[str(name)] = [list(t.shape), str(t.dtype).removeprefix("torch."), digest]
    return digests


def aliases(outputs: list, inputs: list) -> bool:
    """Does any output tensor share memory with any input tensor?"""
    spans = [s for s in (storage_span(t) for t in tensors_in(inputs)) if s and s[1] > s[0]]
    for t in tensors_in(outputs):
        s = storage_span(t)
        if not s or s[1] <= s[0]:
            continue
        if any(s[0] < e and b < s[1] for b, e in spans):
            return True
    return False
