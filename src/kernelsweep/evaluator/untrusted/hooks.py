"""Interpreter hooks through which candidate code could run inside the
harness's own code after a timed call returns (the copy of its output, the
saving of checked outputs): profile, trace and monitoring callbacks, torch
function and dispatch modes left on, gc callbacks, Python signal handlers.
Captured at import, before any candidate code; checked by the candidate's
worker where the harness's code runs after the candidate's. Modes, handlers
and callbacks that torch or another installed library sets (torch's default
device is a function mode) are theirs, not the candidate's: only code from
outside the installed packages counts.

Audit hooks cannot be listed or removed once added, so none is let in: the
hook installed here refuses every later sys.addaudithook (the interpreter
drops the new hook and carries on) and remembers the attempt."""

from __future__ import annotations

import gc
import os
import signal
import sys
import sysconfig

import torch

_getprofile, _gettrace = sys.getprofile, sys.gettrace
_get_tool = getattr(getattr(sys, "monitoring", None), "get_tool", None)
_TOOL_IDS = range(6)
_MODE_STACKS = [(what, getattr(torch._C, length, None), getattr(torch._C, at, None))
                for what, length, at in (("torch function mode", "_len_torch_function_stack", "_get_function_stack_at"),
                                         ("torch dispatch mode", "_len_torch_dispatch_stack", "_get_dispatch_stack_at"))]
_LIBRARIES = tuple({os.path.realpath(sysconfig.get_paths()[k]) + os.sep for k in ("purelib", "platlib", "stdlib")})
_gc_callbacks = list(gc.callbacks)
_SIGNALS = [s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP)]
_handlers = {s: signal.getsignal(s) for s in _SIGNALS}
_audit_refused: list[str] = []


def _refuse_audit_hooks(event: str, args: tuple) -> None:  # noqa: ARG001
    if event == "sys.addaudithook":
        _audit_refused.append("sys.addaudithook")
        raise RuntimeError("audit hooks are not allowed in the candidate's worker")


sys.addaudithook(_refuse_audit_hooks)


def _library_code(obj: object) -> bool:
    """obj's code (a function's, a bound method's, a class's module) is an installed library's."""
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    where = code.co_filename if code is not None else getattr(sys.modules.get(getattr(obj, "__module__", "")),
                                                              "__file__", None)
    return bool(where) and os.path.realpath(where).startswith(_LIBRARIES)


def _modes() -> list[str]:
    found = []
    for what, length, at in _MODE_STACKS:
        if length is not None and at is not None:
            found += [f"{what} {type(m).__name__}" for m in (at(i) for i in range(length()))
                      if not _library_code(type(m))]
    return found


def installed() -> list[str]:
    """The hooks set in this thread (none while the harness's own code runs)."""
    found = sorted(set(_audit_refused))
    if _getprofile() is not None:
        found.append("sys.setprofile")
    if _gettrace() is not None:
        found.append("sys.settrace")
    if _get_tool is not None:
        found += [f"sys.monitoring tool {i}" for i in _TOOL_IDS if _get_tool(i) is not None]
    found += _modes()
    if any(c not in _gc_callbacks and not _library_code(c) for c in gc.callbacks):
        found.append("gc.callbacks")
    for s in _SIGNALS:
        handler = signal.getsignal(s)
        if handler is not _handlers[s] and callable(handler) and not _library_code(handler):
            found.append(f"signal handler {s.name}")
    return found
