"""The structured description of an exception raised in a worker (type, CUDA
error, phase, where in the candidate), which the parent classifies."""

from __future__ import annotations

import re
import traceback
import types
from typing import Any

import torch

_CUDA_ERROR_NAME = re.compile(r"`?(cudaError[A-Za-z]+)")


_CUDA_ERROR_TEXT = {  # the runtime's message for each error we classify
    "an illegal memory access was encountered": "cudaErrorIllegalAddress",
    "misaligned address": "cudaErrorMisalignedAddress",
    "unspecified launch failure": "cudaErrorLaunchFailure",
    "an illegal instruction was encountered": "cudaErrorIllegalInstruction",
    "device-side assert triggered": "cudaErrorAssert",
    "out of memory": "cudaErrorMemoryAllocation",
    "the launch timed out and was terminated": "cudaErrorLaunchTimeout",
    "too many resources requested for launch": "cudaErrorLaunchOutOfResources",
    "no kernel image is available for execution on the device": "cudaErrorNoKernelImageForDevice",
    "invalid configuration argument": "cudaErrorInvalidConfiguration",
    "invalid argument": "cudaErrorInvalidValue",
}


_CUDA_ERROR_LINE = re.compile(r"CUDA error: ([^\n]+)")


_UNEXPECTED_KW = re.compile(r"^(?P<callee>[\w.<>]+)\(\) got an unexpected keyword argument '(?P<kw>\w+)'")


_CPU_ALLOC = re.compile(r"DefaultCPUAllocator: (can't allocate memory|not enough memory)")


def out_of_memory(exc: BaseException) -> str | None:
    """Which memory ran out, or None: Python's MemoryError, torch's device
    OutOfMemoryError, or the RuntimeError torch's host allocator raises."""
    if isinstance(exc, MemoryError):
        return "python"
    if isinstance(exc, torch.OutOfMemoryError):
        return "torch"
    if isinstance(exc, RuntimeError) and _CPU_ALLOC.search(str(exc)):
        return "cpu_allocator"
    return None


def qualified_name(cls: type) -> str:
    module = getattr(cls, "__module__", "")
    return cls.__qualname__ if module in ("builtins", "", None) else f"{module}.{cls.__qualname__}"


def _owner(obj: Any) -> dict[str, Any] | None:
    if obj is None:
        return None
    if isinstance(obj, types.ModuleType):
        return {"kind": "module", "name": obj.__name__, "file": getattr(obj, "__file__", None)}
    cls = obj if isinstance(obj, type) else type(obj)
    return {"kind": "class" if obj is cls else "instance", "name": cls.__qualname__,
            "module": getattr(cls, "__module__", None)}


def cuda_error_name(exc: BaseException) -> str | None:
    """The CUDA runtime error behind an exception, from its error code when
    torch provides one, else from the runtime's own error string."""
    code = getattr(exc, "error_code", None)
    if isinstance(code, int):
        return _CUDA_CODE_NAMES.get(code, f"cudaError{code}")
    text = str(exc)
    m = _CUDA_ERROR_NAME.search(text)
    if m:
        return m.group(1)
    m = _CUDA_ERROR_LINE.search(text)
    if m:
        line = m.group(1).strip().rstrip(".")
        for known, name in _CUDA_ERROR_TEXT.items():
            if line.startswith(known):
                return name
    return None


_CUDA_CODE_NAMES = {
    2: "cudaErrorMemoryAllocation", 9: "cudaErrorInvalidConfiguration", 1: "cudaErrorInvalidValue",
    209: "cudaErrorNoKernelImageForDevice", 700: "cudaErrorIllegalAddress",
    701: "cudaErrorLaunchOutOfResources", 702: "cudaErrorLaunchTimeout", 710: "cudaErrorAssert",
    714: "cudaErrorHardwareStackError", 715: "cudaErrorIllegalInstruction",
    716: "cudaErrorMisalignedAddress", 717: "cudaErrorInvalidAddressSpace", 718: "cudaErrorInvalidPc",
    719: "cudaErrorLaunchFailure",
}


def describe_exception(exc: BaseException, phase: str, *, candidate_file: str | None = None,
                       candidate_names: frozenset[str] = frozenset(),
                       build_failures: dict[int, dict] | None = None,
                       extension_modules: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Everything the parent needs to classify an exception, as plain data."""
    message = str(exc)
    info: dict[str, Any] = {
        "type": qualified_name(type(exc)),
        "mro": [qualified_name(c) for c in type(exc).__mro__],
        "message": message[-20000:],
        "phase": phase,
        "traceback": "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-8000:],
    }
    frames = traceback.extract_tb(exc.__traceback__)
    if frames:
        info["last_frame"] = {"file": frames[-1].filename, "line": frames[-1].lineno, "name": frames[-1].name}
        info["raised_in_candidate"] = bool(candidate_file) and frames[-1].filename == candidate_file
        # Who made the failing access or import: the last frame, or the one that called a
        # module's __getattr__ (torch's, numpy's raise there). A library's own line below the
        # candidate's (numba reaching for a NumPy name this NumPy dropped) is the environment's.
        accessor = frames[-2] if frames[-1].name == "__getattr__" and len(frames) > 1 else frames[-1]
        if candidate_file and accessor.filename != candidate_file \
                and any(f.filename == candidate_file for f in frames):
            info["raised_in_library"] = accessor.filename
    # The build failure that caused this, if any (a candidate may wrap it).
    seen, chain = set(), exc
    while chain is not None and id(chain) not in seen:
        seen.add(id(chain))
        if build_failures and id(chain) in build_failures:
            info["build_failure"] = build_failures[id(chain)]
            break
        chain = chain.__cause__ or chain.__context__
    if isinstance(exc, ModuleNotFoundError):
        info["missing_module"] = exc.name
    elif isinstance(exc, ImportError):
        info["import_name"] = exc.name
    if isinstance(exc, AttributeError):
        info["attribute"] = getattr(exc, "name", None)
        owner = _owner(getattr(exc, "obj", None))
        if owner is not None:
            # kernelsweep_candidate, or kernelsweep_candidate_<variant> (candidate.variant)
            owner["candidate_owned"] = (
                str(owner.get("module")).startswith("kernelsweep_candidate")
                or owner.get("name") in extension_modules
                or str(owner.get("name")).startswith("kernelsweep_candidate"))
        info["owner"] = owner
    if isinstance(exc, NameError) and not isinstance(exc, UnboundLocalError):
        info["undefined_name"] = getattr(exc, "name", None)
    if isinstance(exc, TypeError):
        m = _UNEXPECTED_KW.match(message)
        if m:
            callee = m.group("callee").rsplit(".", 1)[-1]
            info["unexpected_keyword"] = {"callee": callee, "keyword": m.group("kw"),
                                          "callee_is_candidates": callee in candidate_names}
    oom = out_of_memory(exc)
    if oom:
        info["oom"] = oom
    cuda = cuda_error_name(exc)
    if cuda:
        info["cuda_error"] = cuda
    return info
