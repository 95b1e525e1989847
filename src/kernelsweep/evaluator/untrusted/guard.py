"""The snapshot of everything a candidate could patch (the harness's own
functions, torch's namespaces, the reference module) and what changed since."""

from __future__ import annotations

import os
import time
import types
from typing import Any

import torch


def _harness_visible() -> dict[str, Any]:
    """Functions the harness measures or judges with."""
    import json

    items: dict[str, Any] = {
        "time.perf_counter": time.perf_counter,
        "time.perf_counter_ns": time.perf_counter_ns,
        "time.time": time.time,
        "time.monotonic": time.monotonic,
        "os.write": os.write,
        "json.dumps": json.dumps,
        "torch.allclose": torch.allclose,
        "torch.isclose": torch.isclose,
        "torch.equal": torch.equal,
        "torch.testing.assert_close": torch.testing.assert_close,
        "torch.save": torch.save,
        "torch.load": torch.load,
        "torch.manual_seed": torch.manual_seed,
        "torch.cuda.synchronize": torch.cuda.synchronize,
        "torch.cuda.Event": torch.cuda.Event,
        "torch.cuda.Event.record": torch.cuda.Event.record,
        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time,
        "torch.cuda.Event.synchronize": torch.cuda.Event.synchronize,
        "torch.nn.Module.__call__": torch.nn.Module.__call__,
        "torch.nn.Module._call_impl": torch.nn.Module._call_impl,
        "torch.nn.Module.to": torch.nn.Module.to,
        "torch.nn.Module.load_state_dict": torch.nn.Module.load_state_dict,
    }
    from kernelsweep.evaluator.untrusted.clock import Clock

    items.update({"Clock.__init__": Clock.__init__, "Clock.flush": Clock.flush, "Clock.block": Clock.block})
    sync = getattr(torch._C, "_cuda_synchronize", None)
    if sync is not None:
        items["torch._C._cuda_synchronize"] = sync
    return items


def _torch_namespaces() -> dict[str, Any]:
    """Namespaces whose contents the reference's forward depends on."""
    spaces: dict[str, Any] = {
        "torch": torch,
        "torch.nn.functional": torch.nn.functional,
        "torch.Tensor": torch.Tensor,
        "torch.nn.Module": torch.nn.Module,
        "torch.linalg": torch.linalg,
        "torch.fft": torch.fft,
        "torch.special": torch.special,
    }
    for name in dir(torch.nn):
        obj = getattr(torch.nn, name, None)
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module) and obj is not torch.nn.Module:
            spaces[f"torch.nn.{name}"] = obj
    return spaces


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep


def _torch_wrapper_of(new: Any, old: Any, depth: int = 8) -> bool:
    """torch itself wraps some of its functions on first use of a subsystem
    (importing torch._dynamo wraps torch.manual_seed; torch.compile's first
    compilation wraps nn.Module.__init__ and __setstate__, to tag modules made
    inside forward). Such a change is benign: every wrapper from the new object
    down to the original has its code inside torch's own package and holds the
    next one as __wrapped__ or in its closure. A candidate's own wrapper, or
    another torch function put in the place of this one, is not."""
    code = getattr(new, "__code__", None)
    if depth == 0 or code is None or not os.path.abspath(code.co_filename).startswith(_TORCH_DIR):
        return False
    inner = [getattr(new, "__wrapped__", None)] + [_cell(c) for c in getattr(new, "__closure__", None) or ()]
    return any(x is old or (callable(x) and _torch_wrapper_of(x, old, depth - 1)) for x in inner if x is not None)


def _cell(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # an empty cell
        return None


class Guard:
    """A snapshot of what a candidate could patch to fool the harness or slow
    the reference: the harness's own measuring and judging functions, and the
    torch namespaces (torch.*, torch.nn.functional.*, Tensor methods, every
    nn.Module class). Names added later (lazy submodules) are ignored; a name
    whose object changed or vanished is reported, unless torch itself wrapped it."""

    def __init__(self) -> None:
        self._visible = _harness_visible()
        self._spaces = {name: (space, dict(vars(space))) for name, space in _torch_namespaces().items()}

    def patched_harness(self) -> list[str]:
        now = _harness_visible()
        return sorted(k for k, v in self._visible.items()
                      if now.get(k) is not v and not _torch_wrapper_of(now.get(k), v))

    def patched_torch(self) -> list[str]:
        changed = []
        for name, (space, before) in self._spaces.items():
            current = vars(space)
            for key, old in before.items():
                if key not in current:
                    changed.append(f"{name}.{key}")
                elif current[key] is not old and not _torch_wrapper_of(current[key], old):
                    changed.append(f"{name}.{key}")
        return sorted(changed)


def module_fingerprint(module: types.ModuleType) -> dict[str, Any]:
    """Identity of every global of a module and of every attribute of the
    classes it defines (to see a candidate rewrite the reference)."""
    prints: dict[str, Any] = {}
    for key, value in vars(module).items():
        prints[key] = id(value)
        if isinstance(value, type) and value.__module__ == module.__name__:
            for attr, v in vars(value).items():
                prints[f"{key}.{attr}"] = id(v)
                code = getattr(v, "__code__", None)
                if code is not None:
                    prints[f"{key}.{attr}.__code__"] = id(code)
        code = getattr(value, "__code__", None)
        if code is not None:
            prints[f"{key}.__code__"] = id(code)
    return prints


def fingerprint_changes(before: dict[str, Any], module: types.ModuleType) -> list[str]:
    after = module_fingerprint(module)
    return sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
