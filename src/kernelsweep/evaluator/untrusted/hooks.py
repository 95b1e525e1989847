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

import functools
import gc
import os
import signal
import site
import sys
import sysconfig

import torch

_getprofile, _gettrace = sys.getprofile, sys.gettrace
_get_tool = getattr(getattr(sys, "monitoring", None), "get_tool", None)
_TOOL_IDS = range(6)
_MODE_STACKS = tuple((what, getattr(torch._C, length, None), getattr(torch._C, at, None), hook)
                     for what, length, at, hook in (
                         ("torch function mode", "_len_torch_function_stack", "_get_function_stack_at",
                          "__torch_function__"),
                         ("torch dispatch mode", "_len_torch_dispatch_stack", "_get_dispatch_stack_at",
                          "__torch_dispatch__")))
# Where installed libraries live: the interpreter's own folders, every site folder,
# and the folder torch itself was loaded from (a Debian dist-packages, a PYTHONPATH entry).
_LIBRARIES = tuple(sorted({os.path.realpath(d) + os.sep for d in (
    *(sysconfig.get_paths()[k] for k in ("purelib", "platlib", "stdlib", "platstdlib")),
    *site.getsitepackages(), site.getusersitepackages(),
    os.path.dirname(os.path.dirname(torch.__file__))) if d}))
_gc_callbacks = tuple(gc.callbacks)
_SIGNALS = tuple(s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP))
_handlers = tuple(signal.getsignal(s) for s in _SIGNALS)
_audit_refused: list[str] = []


def _refuse_audit_hooks(event: str, args: tuple) -> None:  # noqa: ARG001
    if event == "sys.addaudithook":
        _audit_refused.append("sys.addaudithook")
        raise RuntimeError("audit hooks are not allowed in the candidate's worker")


sys.addaudithook(_refuse_audit_hooks)


def _code_file(obj: object) -> str | None:
    """The file of the Python code obj runs, through partials and wrappers;
    None for code that has no file (a builtin)."""
    for _ in range(8):
        if isinstance(obj, functools.partial):
            obj = obj.func
        elif getattr(obj, "__wrapped__", None) is not None:
            obj = obj.__wrapped__  # type: ignore[attr-defined]
        else:
            break
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    if code is None and not isinstance(obj, type):
        code = getattr(getattr(type(obj), "__call__", None), "__code__", None)
    return code.co_filename if code is not None else None


def _library_code(obj: object) -> bool:
    """obj runs an installed library's code (a builtin, signal's default handler, counts)."""
    where = _code_file(obj)
    if where is None:
        return not isinstance(obj, functools.partial) and type(obj).__name__ in ("builtin_function_or_method",)
    return os.path.realpath(where).startswith(_LIBRARIES)


def _modes() -> list[str]:
    found = []
    for what, length, at, hook in _MODE_STACKS:
        if length is not None and at is not None:
            found += [f"{what} {type(m).__name__}" for m in (at(i) for i in range(length()))
                      if not _library_code(getattr(type(m), hook, None))]
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
    for s, before in zip(_SIGNALS, _handlers):
        handler = signal.getsignal(s)
        if handler is not before and callable(handler) and not _library_code(handler):
            found.append(f"signal handler {s.name}")
    return found
