"""The snapshot of everything a candidate could patch (the harness's own
functions, torch's namespaces, the reference module) and what changed since."""

from __future__ import annotations

import os
import re
import sys
import time
import types
from typing import Any

import torch

from kernelsweep.evaluator.untrusted.dispatchmode import HarnessMode


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


# Containers the harness fills as it runs (caches, counters) are left out, and None
# (a cache not made yet); settings it only reads (paths, names, tuples) are kept.
_CHANGING = (type(None), list, dict, set)


def _harness_module(name: str, module: Any) -> bool:
    if name.startswith("kernelsweep"):
        return True
    # The worker's own entry module, run as __main__.
    return name == "__main__" and os.sep + "kernelsweep" + os.sep in str(getattr(module, "__file__", ""))


def _harness_bindings() -> dict[str, int]:
    """The identity of every function, class and module the harness's own
    loaded modules bind at their top level (the captured primitives, the
    helpers the worker calls after a timed call), and of every attribute of
    the classes they define: whatever a candidate could rebind to run inside
    the harness's code or to misreport it, and of the settings its checks
    read (a library folder, a torch path), without a list to keep in step."""
    found: dict[str, int] = {}
    for name, module in list(sys.modules.items()):
        if module is None or not _harness_module(name, module):
            continue
        for key, value in list(vars(module).items()):
            if isinstance(value, _CHANGING) or key.startswith("__"):
                continue
            found[f"{name}.{key}"] = id(value)
            if isinstance(value, type) and value.__module__ == module.__name__:
                for attr, v in list(vars(value).items()):
                    if not isinstance(v, _CHANGING):
                        found[f"{name}.{key}.{attr}"] = id(v)
    return found


_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_REGISTERED_AT = re.compile(r"registered at (.+?)(?: ::|$)")


def _dispatch_registrations() -> dict[str, str]:
    """Every operator's dispatch table as the dispatcher prints it (~50 ms;
    empty where this torch cannot list them)."""
    names = getattr(torch._C, "_dispatch_get_all_op_names", None)
    if names is None or not hasattr(torch._C, "_dispatch_dump"):
        return {}
    return {op: torch._C._dispatch_dump(op) for op in names()}


def _root(where: str) -> str:
    return os.sep.join(where.split(os.sep)[:4])  # '/__w/pytorch/pytorch' of torch's own build


def _build_roots(tables: dict[str, str]) -> set[str]:
    """Where torch's C++ kernels say they were registered (its build tree's
    paths): a kernel torch registers later, as a library loads, is torch's."""
    return {_root(m.group(1)) for text in tables.values() for m in _REGISTERED_AT.finditer(text)
            if m.group(1).startswith(os.sep) and not m.group(1).startswith(_TORCH_DIR)}


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


def ops_dispatched(fn: Any) -> list[str]:
    """The operators fn() dispatches (run once, before any candidate code):
    what the harness's own copies of an output go through."""
    seen: set[str] = set()

    class _Seen(HarnessMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            seen.add(func.name())  # with its overload, as the dispatcher lists it: aten::index.Tensor
            return func(*args, **(kwargs or {}))

    with _Seen():
        fn()
    return sorted(seen)


class Guard:
    """A snapshot of what a candidate could patch to fool the harness or slow
    the reference: the harness's own measuring and judging functions, and the
    torch namespaces (torch.*, torch.nn.functional.*, Tensor methods, every
    nn.Module class). Names added later (lazy submodules) are ignored; a name
    whose object changed or vanished is reported, unless torch itself wrapped it."""

    def __init__(self, harness_ops: list[str] | None = None) -> None:
        """harness_ops: the operators the harness's own work on the candidate's
        outputs dispatches (ops_dispatched): a kernel of the candidate's for one
        of them is candidate code inside the harness (patched_harness; checked
        again at every save, where a full check would cost ~50 ms), for any
        other a change to torch (patched_torch)."""
        self.harness_ops = harness_ops or []
        self.imported_overrides: list[str] = []  # note_imported(): every operator, once
        self._visible = _harness_visible()
        self._bindings = _harness_bindings()
        self._dispatch = _dispatch_registrations()
        self._torch_roots = _build_roots(self._dispatch)
        self._spaces = {name: (space, dict(vars(space))) for name, space in _torch_namespaces().items()}

    def patched_harness(self) -> list[str]:
        now = _harness_visible()
        bindings = _harness_bindings()
        return sorted({k for k, v in self._visible.items() if now.get(k) is not v and not _torch_wrapper_of(now.get(k), v)}
                      | {k for k, v in self._bindings.items() if bindings.get(k) != v}
                      | set(self.overridden_ops(self.harness_ops)))

    def note_imported(self) -> None:
        """Every operator's table but the harness's compared once, after the
        candidate's import and construction, on the host (~50 ms): a kernel
        registered then is a change to torch (informational); the harness's own
        operators are compared at every save and report."""
        harness = set(self.harness_ops)
        self.imported_overrides = self.overridden_ops([op for op in self._dispatch if op not in harness])

    def overridden_ops(self, only: list[str] | None = None) -> list[str]:
        """Operators that existed before the candidate ran and have since been
        given another kernel (torch.library or a C++ TORCH_LIBRARY_IMPL over
        aten::clone, say): the harness's own copies and comparisons dispatch
        through them too. A candidate's operators in its own namespace are new,
        and not counted. For ONLY (the harness's operators) every kernel added
        counts, whatever file it says it was registered at: that text is the
        registering code's to write (a `#line`, or torch._C._dispatch_library
        called with torch's own build path), and torch registers none for them
        as it runs. For the others a kernel registered at torch's own files or
        build tree is torch's (a library it loads later)."""
        found = []
        for op in self._dispatch if only is None else only:
            before = self._dispatch.get(op)
            if before is None:
                continue
            now = torch._C._dispatch_dump(op)
            if now == before:
                continue
            old: dict[str, int] = {}  # lines counted (a line added twice over is added), in builtins only
            for line in before.splitlines():
                old[line] = old.get(line, 0) + 1
            for line in now.splitlines():
                if old.get(line, 0) > 0:
                    old[line] -= 1
                    continue
                where = _REGISTERED_AT.search(line)
                if where and (only is not None or not self._torchs(where.group(1))):
                    found.append(f"dispatcher {op} ({line.split(':', 1)[0].strip()})")
                    break
        return found

    def _torchs(self, where: str) -> bool:
        return where.startswith(_TORCH_DIR) or _root(where) in self._torch_roots

    def patched_torch(self) -> list[str]:
        """Torch's namespaces, and its operators given a kernel of the
        candidate's other than those the harness itself dispatches."""
        changed = list(self.imported_overrides)
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
