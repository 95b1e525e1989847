"""The device gate: before "go" (the late claim, untrusted/frame.py) the device
is not the worker's yet; the job before may be timing on it. Code run then
(a reference's host-side preparation, a candidate's import and ModelNew's
construction) that starts CUDA waits here until the device has been taken,
instead of creating a context and running kernels beside another job's timing.

Python's first use of CUDA goes through torch.cuda._lazy_init: torch.cuda's
functions call it, and torch's C++ tensor factories call it by name. The gate
takes its place in torch.cuda and in the submodules that imported it. A
candidate that calls the CUDA driver itself (ctypes, its extension's own
initialisation) is not held back; it can only disturb the job before, never
help its own verdict, which is measured after "go"."""

from __future__ import annotations

import os
import sys
import threading
from typing import Any, Callable


class DeviceGate:
    def __init__(self) -> None:
        self._open = threading.Event()
        self._harness: int | None = None  # the thread that sets the device up before opening
        self.on_wait: Callable[[], None] | None = None  # told when code first waits here

    def install(self) -> "DeviceGate":
        import torch.cuda

        original = torch.cuda._lazy_init

        def gated_lazy_init() -> Any:
            if not self._open.is_set() and threading.get_ident() != self._harness:
                if self.on_wait is not None:
                    self.on_wait()
                self._open.wait()
            return original()

        for name, module in list(sys.modules.items()):
            if (name == "torch.cuda" or name.startswith("torch.cuda.")) \
                    and getattr(module, "_lazy_init", None) is original:
                module._lazy_init = gated_lazy_init
        # A process forked before "go" has no thread to open its gate: it is as
        # ungated as code calling the driver itself.
        os.register_at_fork(after_in_child=self.open)
        return self

    def let_harness_through(self) -> None:
        """The calling thread (the harness's, at "go") starts CUDA before the gate opens."""
        self._harness = threading.get_ident()

    def open(self) -> None:
        self._open.set()
