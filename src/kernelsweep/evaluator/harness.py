"""Helpers shared by the worker children: loading modules by path, seeding,
inputs and precision, output trees, aliasing, host limits, the snapshot of
everything a candidate could patch, and the structured description of an
exception. Only workers import this (it imports torch)."""

from __future__ import annotations

import importlib.util
import os
import random
import re
import resource
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable

import torch

DTYPES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

# Captured before any candidate code runs.
_save = torch.save
_load = torch.load
_perf_counter = time.perf_counter


# ---------------------------------------------------------------- modules ---
def load_module(path: str | os.PathLike, name: str, *, register: bool) -> types.ModuleType:
    """Execute a Python file as a module. The candidate is registered in
    sys.modules (some code needs that, e.g. dataclasses and pickling); the
    reference is not, so a candidate cannot find it by name."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)  # seeds every CUDA device too
    try:
        import numpy as np
        np.random.seed(seed % (2**32))
    except ImportError:
        pass


def resolve_device(name: str) -> torch.device:
    if name == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device cuda requested but torch sees no CUDA device")
        torch.cuda.set_device(0)
        torch.zeros(1, device="cuda")  # create the context now, not inside a measurement
        return torch.device("cuda", 0)
    return torch.device("cpu")


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        _cuda_synchronize()


_cuda_synchronize = torch.cuda.synchronize


def set_limits(device: str, memory_limit: int | None) -> None:
    """No core files (a segfaulting candidate must not write gigabytes) and, on
    the CPU target, a cap on address space so a runaway allocation fails as
    an allocation error instead of invoking the kernel's OOM killer."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if device == "cpu" and memory_limit:
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = memory_limit if hard == resource.RLIM_INFINITY else min(memory_limit, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))


# ----------------------------------------------------------------- inputs ---
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


def cast_precision(obj: Any, precision: str) -> Any:
    """Floating tensors to the evaluation precision; integer tensors unchanged."""
    dtype = DTYPES[precision]
    return map_tensors(obj, lambda t: t.to(dtype) if t.is_floating_point() else t)


def to_device(obj: Any, device: torch.device) -> Any:
    return map_tensors(obj, lambda t: t.to(device))


def clone_tree(obj: Any) -> Any:
    return map_tensors(obj, lambda t: t.clone())


def make_inputs(module: types.ModuleType, seed: int, precision: str) -> list:
    set_seed(seed)
    inputs = module.get_inputs()
    return list(cast_precision(list(inputs), precision))


def make_init_inputs(module: types.ModuleType, seed: int) -> list:
    set_seed(seed)
    init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
    return list(init)


def tree_nbytes(obj: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors_in(obj))


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


# ---------------------------------------------------------------- outputs ---
def flatten_output(out: Any) -> tuple[str, list]:
    """A structure string and the leaves, so outputs of any nesting compare."""
    leaves: list = []

    def walk(o: Any) -> str:
        if isinstance(o, torch.Tensor):
            leaves.append(o)
            return "T"
        if isinstance(o, (list, tuple)):
            return f"{type(o).__name__}[{','.join(walk(x) for x in o)}]"
        if isinstance(o, dict):
            return "dict[" + ",".join(f"{k}:{walk(o[k])}" for k in sorted(o, key=str)) + "]"
        if o is None:
            return "None"
        if isinstance(o, (bool, int, float)):
            leaves.append(o)
            return type(o).__name__
        return f"other:{type(o).__name__}"

    return walk(out), leaves


def portable_leaves(leaves: list) -> list:
    """Leaves as compact CPU tensors / numbers for torch.save (a view would
    otherwise drag its whole storage along)."""
    return [x.detach().to("cpu").contiguous().clone() if isinstance(x, torch.Tensor) else x for x in leaves]


def save(obj: Any, path: str | os.PathLike) -> None:
    _save(obj, str(path))


def load(path: str | os.PathLike) -> Any:
    return _load(str(path), map_location="cpu", weights_only=True)


def storage_span(t: torch.Tensor) -> tuple[int, int] | None:
    try:
        st = t.untyped_storage()
        return (st.data_ptr(), st.data_ptr() + st.nbytes())
    except Exception:
        return None


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


# -------------------------------------------------------- global settings ---
class GlobalSettings:
    """Process-wide torch switches a candidate can flip (threads, TF32, cuDNN
    modes, determinism). The timing worker gives the reference the harness's
    settings and the candidate its own, so flipping them cannot slow the
    reference down."""

    def __init__(self, values: dict[str, Any]):
        self.values = values

    @classmethod
    def capture(cls) -> "GlobalSettings":
        v: dict[str, Any] = {
            "num_threads": torch.get_num_threads(),
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "default_dtype": str(torch.get_default_dtype()),
            "cudnn.enabled": torch.backends.cudnn.enabled,
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "cuda.matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cuda.matmul.allow_fp16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "cuda.matmul.allow_bf16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
        }
        return cls(v)

    def differences(self, other: "GlobalSettings") -> list[str]:
        return sorted(k for k in self.values if self.values[k] != other.values.get(k))

    def apply(self) -> None:
        v = self.values
        if torch.get_num_threads() != v["num_threads"]:
            torch.set_num_threads(v["num_threads"])
        if torch.are_deterministic_algorithms_enabled() != v["deterministic"]:
            torch.use_deterministic_algorithms(v["deterministic"])
        if torch.get_float32_matmul_precision() != v["float32_matmul_precision"]:
            torch.set_float32_matmul_precision(v["float32_matmul_precision"])
        dtype = getattr(torch, v["default_dtype"].split(".")[-1])
        if torch.get_default_dtype() != dtype:
            torch.set_default_dtype(dtype)
        torch.backends.cudnn.enabled = v["cudnn.enabled"]
        torch.backends.cudnn.benchmark = v["cudnn.benchmark"]
        torch.backends.cudnn.deterministic = v["cudnn.deterministic"]
        torch.backends.cudnn.allow_tf32 = v["cudnn.allow_tf32"]
        torch.backends.cuda.matmul.allow_tf32 = v["cuda.matmul.allow_tf32"]
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = \
            v["cuda.matmul.allow_fp16_reduced_precision_reduction"]
        torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = \
            v["cuda.matmul.allow_bf16_reduced_precision_reduction"]


# ------------------------------------------------------------------ guard ---
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


_TORCH_DIR = os.path.dirname(torch.__file__)


def _torch_wrapper_of(new: Any, old: Any) -> bool:
    """torch itself wraps some of its functions on first use of a subsystem
    (importing torch._dynamo wraps torch.manual_seed, for one). Such a change
    is benign: each wrapper in the __wrapped__ chain down to the original has
    its code inside torch's own package."""
    for _ in range(8):
        code = getattr(new, "__code__", None)
        if code is None or not os.path.abspath(code.co_filename).startswith(_TORCH_DIR):
            return False
        new = getattr(new, "__wrapped__", None)
        if new is None:
            return False
        if new is old:
            return True
    return False


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


# ----------------------------------------------------------- exceptions ---
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
            owner["candidate_owned"] = (
                owner.get("module") == "kernelsweep_candidate"
                or owner.get("name") in extension_modules
                or owner.get("name") == "kernelsweep_candidate")
        info["owner"] = owner
    if isinstance(exc, NameError) and not isinstance(exc, UnboundLocalError):
        info["undefined_name"] = getattr(exc, "name", None)
    if isinstance(exc, TypeError):
        m = _UNEXPECTED_KW.match(message)
        if m:
            callee = m.group("callee").rsplit(".", 1)[-1]
            info["unexpected_keyword"] = {"callee": callee, "keyword": m.group("kw"),
                                          "callee_is_candidates": callee in candidate_names}
    if isinstance(exc, (torch.OutOfMemoryError, MemoryError)):
        info["oom"] = "python" if isinstance(exc, MemoryError) else "torch"
    elif isinstance(exc, RuntimeError) and _CPU_ALLOC.search(message):
        info["oom"] = "cpu_allocator"
    cuda = cuda_error_name(exc)
    if cuda:
        info["cuda_error"] = cuda
    return info


# ------------------------------------------------------------ device info ---
def device_info(device: torch.device) -> dict[str, Any]:
    import platform

    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update({
            "device_name": props.name,
            "capability": f"{props.major}.{props.minor}",
            "memory_bytes": props.total_memory,
            "multiprocessors": props.multi_processor_count,
            "l2_bytes": getattr(props, "L2_cache_size", None),
            "driver": _nvidia_driver(),
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        })
        clock = getattr(props, "memory_clock_rate", None)  # kHz
        width = getattr(props, "memory_bus_width", None)  # bits
        if clock and width:
            info["peak_bytes_per_s"] = 2.0 * clock * 1e3 * width / 8.0
    else:
        caches = _cpu_cache_bytes()
        info.update({"device_name": _cpu_name(), "driver": None, "cores": os.cpu_count(),
                     "l2_bytes": caches.get(2), "llc_bytes": max(caches.values()) if caches else None})
    return info


def _nvidia_driver() -> str | None:
    try:
        text = Path("/proc/driver/nvidia/version").read_text()
        m = re.search(r"Kernel Module\s+(?:for\s+\S+\s+)?([\d.]+)", text)
        if m:
            return m.group(1)
    except OSError:
        pass
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=15)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        return None


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform
    return platform.processor() or platform.machine()


def _cpu_cache_bytes() -> dict[int, int]:
    """Cache sizes by level (1, 2, 3) of the first CPU, from sysfs."""
    sizes: dict[int, int] = {}
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for index in base.glob("index*"):
            level = int((index / "level").read_text().strip())
            size = (index / "size").read_text().strip()
            mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(size[-1:], 1)
            sizes[level] = max(sizes.get(level, 0), int(size.rstrip("KMG")) * mult)
    except (OSError, ValueError):
        pass
    return sizes
