"""Does the output depend on the candidate's extension? (worker side)

Every module a candidate's load_inline/load returns is handed back as a
proxy whose functions count their calls and, while the harness has armed
them for one call, perturb what they return (or, for a function that writes
into an argument, that argument). A call in which the extension ran but the
output still matches the reference shows that the extension's result was
not used. The armed call is an ordinary trial with fresh inputs, chosen at
random by the parent."""

from __future__ import annotations

import sys
import time
import types
from collections import Counter
from typing import Any

import torch

from kernelsweep.evaluator.untrusted.dispatchmode import HarnessMode


def perturb_(t: torch.Tensor) -> None:
    if t.numel() == 0:
        return
    if t.is_floating_point() or t.is_complex():
        scale = float(t.detach().abs().float().mean()) + 1.0
        t.add_(torch.randn_like(t) * scale)
    elif t.dtype != torch.bool:
        t.add_(1)
    else:
        t.logical_not_()


def _tensors(obj: Any) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (list, tuple)):
        return [t for o in obj for t in _tensors(o)]
    return []


# The calling thread's CPU time, captured before any candidate code: the work share's
# clock, for the call and for the extension's calls inside it. Not the process's: the
# intra-op pool's threads spin on after a parallel region and their time would fill
# both sides alike (an extension that only calls torch measured 0.47 so). A kernel's
# own parallel region keeps the calling thread in it (it works a part and waits).
cpu_ns = time.thread_time_ns


_TORCH_NAMESPACES = frozenset({"aten", "prims", "prim", "quantized", "sparse", "_quantized"})


class _TorchWork(HarnessMode):
    """The CPU time of the torch operators an extension's call dispatches
    itself (at::add from its C++, or a Python callback into torch): PyTorch's
    work, not the candidate's own, taken out of the time inside the call.
    Operators a torch operator runs in turn are inside its own time."""

    def __init__(self) -> None:
        super().__init__()
        self.ns = 0
        self.ops = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        if getattr(func, "namespace", "aten") not in _TORCH_NAMESPACES:
            return func(*args, **(kwargs or {}))  # the candidate's own operator: its work
        t0 = cpu_ns()
        try:
            return func(*args, **(kwargs or {}))
        finally:
            self.ns += cpu_ns() - t0
            self.ops += 1


_ADD, _ONES = torch.add, torch.ones(4)  # captured before any candidate code
# A pybind11 function of torch's that takes a tensor and does next to nothing: what
# calling into an extension costs before its code runs (None where this build lacks it).
_BOUND = getattr(getattr(torch._C, "_functorch", None), "is_batchedtensor", None)


def _probe(t: torch.Tensor, n: int = 4096) -> torch.Tensor | None:
    """Up to n of t's elements, spread over it (gathered, never a copy of the
    whole): enough to see an argument written. None where t has no such view
    (sparse, nested, meta): then it is not taken to be unchanged."""
    try:
        flat = t.detach().as_strided((t.numel(),), (1,)) if t.is_contiguous() else t.detach().flatten()
        positions = torch.linspace(0, max(0, t.numel() - 1), min(n, t.numel()), device=t.device).long()
        return flat[positions].clone()
    except (RuntimeError, NotImplementedError, ValueError):
        return None


def _unchanged(t: torch.Tensor, old: torch.Tensor | None) -> bool:
    now = _probe(t)
    try:
        return old is not None and now is not None and bool(torch.equal(now, old))
    except (RuntimeError, NotImplementedError):
        return False


def _least(values: list[int]) -> int:
    return max(0, min(values))


def _mode_costs(calls: int = 40) -> tuple[int, int, int]:
    """What measuring costs, measured where and when the extension's calls
    are: (unseen, added, binding). unseen: the time reaching _TorchWork from the
    dispatcher takes an operator beyond what the mode counts, taken out of the
    time inside the call with the operator's own; added: the whole time the mode
    adds to an operator, taken out of the call's time, which without the mode
    would not hold it; binding: what entering a bound function costs before its
    code runs, taken out of each extension call's time (an entry point that
    returns its argument does nothing else). The least of the calls each: an
    overstated cost, taken once per operator, would take an honest kernel's own
    time away (an extension allocating its output 400 times a call, under load)."""
    plain, through, unseen, bound = [], [], [], []
    for _ in range(calls):
        t0 = cpu_ns()
        _ADD(_ONES, _ONES)
        plain.append(cpu_ns() - t0)
    work = _TorchWork()
    with work:
        for _ in range(calls):
            counted = work.ns
            t0 = cpu_ns()
            _ADD(_ONES, _ONES)
            through.append(cpu_ns() - t0)
            unseen.append(through[-1] - (work.ns - counted))
    for _ in range(calls if _BOUND is not None else 0):
        t0 = cpu_ns()
        _BOUND(_ONES)
        bound.append(cpu_ns() - t0)
    return _least(unseen), max(0, _least(through) - _least(plain)), _least(bound) if bound else 0


class Perturber:
    def __init__(self) -> None:
        self.armed = False
        self.calls: Counter = Counter()
        self.returned = 0  # calls that returned, all functions together
        self.fired = 0
        # CPU time inside extension calls while `measuring`, less the torch
        # operators they dispatch (the work share on the CPU target,
        # untrusted/candidate._call_checked), and the time measuring them added
        # to the call (taken out of the call's time there).
        self.measuring = False
        self.inside_ns = 0
        self.inside_raw_ns = 0  # as measured: nested in the call's own time, on the same clock
        self.added_ns = 0
        self.costs: tuple[int, int, int] | None = None  # _mode_costs, at the first measured call

    def _timed(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        if self.costs is None:
            self.costs = _mode_costs()
        unseen, added, binding = self.costs
        start = cpu_ns()  # the probes' time is measuring's too, not the call's
        given = _tensors(list(args) + list(kwargs.values()))
        before = [_probe(t) for t in given]
        torch_work = _TorchWork()
        with torch_work:
            t0 = cpu_ns()
            result = fn(*args, **kwargs)
            inside = cpu_ns() - t0
        untouched = not torch_work.ops and any(result is t for t in given) \
            and all(_unchanged(t, old) for t, old in zip(given, before))
        self.added_ns += cpu_ns() - start - inside + torch_work.ops * added
        self.inside_raw_ns += inside
        if not untouched:  # an argument handed back unchanged: no work of its own
            self.inside_ns += max(0, inside - binding - torch_work.ns - torch_work.ops * unseen)
        return result

    def wrap(self, module: Any) -> Any:
        if not isinstance(module, types.ModuleType):
            return module
        proxy = types.ModuleType(module.__name__, module.__doc__)
        for name, value in vars(module).items():
            setattr(proxy, name, self._wrap_function(module.__name__, name, value)
                    if callable(value) and not isinstance(value, type) and not name.startswith("__") else value)
        sys.modules[module.__name__] = proxy
        return proxy

    def _wrap_function(self, module_name: str, name: str, fn: Any) -> Any:
        perturber = self

        def call(*args: Any, **kwargs: Any) -> Any:
            # Only calls that return count: one that raised (and was caught) did no work.
            if not perturber.armed:
                result = perturber._timed(fn, args, kwargs) if perturber.measuring else fn(*args, **kwargs)
                perturber.calls[f"{module_name}.{name}"] += 1
                perturber.returned += 1
                return result
            before = [(t, t.clone()) for t in _tensors(list(args) + list(kwargs.values()))]
            result = fn(*args, **kwargs)
            perturber.calls[f"{module_name}.{name}"] += 1
            perturber.returned += 1
            perturber.fired += 1
            with torch.no_grad():
                returned = _tensors(result)
                targets = returned or [t for t, old in before if not torch.equal(t, old)]
                for t in targets:
                    perturb_(t)
            return result

        call.__name__ = name
        call.__doc__ = getattr(fn, "__doc__", None)
        return call
