"""The base of the harness's own torch dispatch modes (the operators its
copies dispatch, PyTorch's work inside an extension's call).

TorchDispatchMode wraps a subclass's __torch_dispatch__ in
torch._dynamo.disable, whose first call imports torch._dynamo: 1.6 s of
every evaluation on two cores, for a guard against compiling a frame that
nothing can compile until dynamo is imported. Here the plain method runs
until torch._dynamo is in sys.modules, the disabled one after."""

from __future__ import annotations

import sys
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


class HarnessMode(TorchDispatchMode):
    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        return False  # the wrapping is done below, lazily

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        raw = cls.__dict__.get("__torch_dispatch__")
        if raw is None:
            return
        disabled: list[Any] = []

        def __torch_dispatch__(self: Any, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if "torch._dynamo" not in sys.modules:
                return raw(self, func, types, args, kwargs)
            if not disabled:
                disabled.append(torch._disable_dynamo(raw, recursive=True))
            return disabled[0](self, func, types, args, kwargs)

        cls.__torch_dispatch__ = __torch_dispatch__
