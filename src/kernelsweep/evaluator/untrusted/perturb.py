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


def _perturb_(t: torch.Tensor) -> None:
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


_cpu_ns = time.process_time_ns  # captured before any candidate code


class Perturber:
    def __init__(self) -> None:
        self.armed = False
        self.calls: Counter = Counter()
        self.returned = 0  # calls that returned, all functions together
        self.fired = 0
        # CPU time inside extension calls while `measuring` (the work share on the
        # CPU target, untrusted/candidate._call_checked).
        self.measuring = False
        self.inside_ns = 0

    def _timed(self, fn: Any, args: tuple, kwargs: dict) -> Any:
        t0 = _cpu_ns()
        result = fn(*args, **kwargs)
        self.inside_ns += _cpu_ns() - t0
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
                    _perturb_(t)
            return result

        call.__name__ = name
        call.__doc__ = getattr(fn, "__doc__", None)
        return call
