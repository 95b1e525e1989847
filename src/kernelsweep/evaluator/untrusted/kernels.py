"""Dynamic half of custom-kernel detection (worker side): run one forward
call and record what actually executed.

- CUDA: the torch profiler's device activity lists every kernel launched; a
  launch counts as the candidate's when its name contains one of the kernel
  names the source defines (`__global__` functions, `@triton.jit` and Numba's
  `@cuda.jit` functions).
- CPU: a profile hook counts calls from Python into the candidate's extension
  modules (the pybind functions load_inline bound), and the profiler's op list
  catches custom ops registered with TORCH_LIBRARY under the candidate's
  namespace."""

from __future__ import annotations

import re
import sys
from collections import Counter
from typing import Any, Callable

import torch

# Kernels that come from PyTorch, its libraries or inductor, never from a candidate.
LIBRARY_KERNEL = re.compile(
    r"(^|\W)(at::|c10::|cub::|thrust::|cutlass|cublas|cudnn|cufft|curand|nccl)"
    r"|^(void )?(sm\d+_xmma|nvjet|ampere_|turing_|volta_|hopper_|sm90_|sm80_)"
    r"|^triton_(poi|red|per|tem|for|mm|bmm)_|^Memcpy|^Memset"
    r"|elementwise_kernel|reduce_kernel|gemmSN|gemv|splitKreduce|cutlass")


def _word(name: str) -> re.Pattern:
    return re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])")


def numba_entry_names(kernel: str) -> set[str]:
    """The names in an Itanium-mangled nested name (`_ZN<len><part>...E`) that
    carry an ABI tag (`B<len><tag>`), as Numba names its kernels
    (`_ZN8__main__10add_kernelB2v1B92cw51c...E5ArrayIf...`); where the profiler
    does not demangle, the launch carries its function's name so. PyTorch's own
    mangled kernel names carry no ABI tag: `_ZN2at6native3addE` names none."""
    if not kernel.startswith("_ZN"):
        return set()
    tagged, i, n = set(), 3, len(kernel)
    while i < n and kernel[i].isdigit():
        j = i
        while j < n and kernel[j].isdigit():
            j += 1
        length = int(kernel[i:j])
        part, i = kernel[j:j + length], j + length
        while i + 1 < n and kernel[i] == "B" and kernel[i + 1].isdigit():  # ABI tags after the part
            tagged.add(part)
            j = i + 1
            while j < n and kernel[j].isdigit():
                j += 1
            i = j + int(kernel[i + 1:j])
    return tagged


def load_profiler() -> None:
    """What the profiler's first use imports: it looks for torch._inductor
    (torch.profiler's prepare_trace), and that import brings torch._dynamo, seconds
    of start-up. Done before the guard's snapshot, whose wrappers it changes."""
    import torch._inductor  # noqa: F401
    import torch.profiler  # noqa: F401


def candidates_kernels(kernels: list[str], kernel_names: list[str]) -> list[str]:
    """The launched KERNELS that are the candidate's: those carrying one of the
    kernel names its source defines, as a whole word (demangled) or as a
    Numba-mangled entry name (numba_entry_names)."""
    patterns, names = [_word(n) for n in kernel_names], set(kernel_names)
    return sorted(k for k in kernels if any(p.search(k) for p in patterns) or names & numba_entry_names(k))


def observe(call: Callable[[], Any], *, device: torch.device, extension_modules: frozenset[str],
            kernel_names: list[str], op_namespaces: list[str]) -> dict[str, Any]:
    calls: Counter = Counter()

    def tracer(frame, event, arg):  # noqa: ARG001 - sys.setprofile signature
        if event == "c_call":
            module = getattr(arg, "__module__", None)
            if module in extension_modules:
                calls[f"{module}.{getattr(arg, '__name__', '?')}"] += 1

    device_events: list[str] = []
    device_us: list[tuple[str, float]] = []  # each kernel's duration: the work share
    host_ops: list[str] = []
    # The profiler's first use imports torch._dynamo (load_profiler), so on the
    # CPU it runs only when there are custom ops to see; calls into pybind
    # extension functions are caught by the profile hook alone.
    use_profiler = device.type == "cuda" or bool(op_namespaces)
    if use_profiler:
        from torch.profiler import ProfilerActivity, profile

        activities = [ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(ProfilerActivity.CUDA)
        with profile(activities=activities) as prof:
            sys.setprofile(tracer)
            try:
                call()
            finally:
                sys.setprofile(None)
            if device.type == "cuda":
                torch.cuda.synchronize()
        for evt in prof.events():
            kind = str(getattr(evt, "device_type", ""))
            (device_events if kind.endswith("CUDA") else host_ops).append(evt.name)
            if kind.endswith("CUDA"):
                device_us.append((evt.name, float(evt.time_range.elapsed_us())))
            # Older profilers attach kernels to the host op that launched them.
            device_events.extend(k.name for k in getattr(evt, "kernels", []) or [])
    else:
        sys.setprofile(tracer)
        try:
            call()
        finally:
            sys.setprofile(None)

    kernels = sorted(set(device_events))
    matched = candidates_kernels(kernels, kernel_names)
    unknown = sorted(k for k in kernels if k not in matched and not LIBRARY_KERNEL.search(k))
    custom_ops = sorted({op for op in host_ops if "::" in op and op.split("::", 1)[0] in op_namespaces})
    share = None
    if device.type == "cuda":
        launched = bool(matched)
        total = sum(us for name, us in device_us if not name.startswith(("Memcpy", "Memset")))
        # The candidate's: kernels its source names, and those from no known library (CuPy, PTX).
        mine = sum(us for name, us in device_us if name in matched or name in unknown)
        share = round(min(1.0, mine / total), 4) if total > 0 else None
    else:
        launched = bool(calls) or bool(custom_ops)
    return {
        "launched": launched,
        "kernels": matched[:50],
        "extension_calls": dict(sorted(calls.items())[:50]),
        "custom_ops": custom_ops[:50],
        "other_kernels": unknown[:50],
        "library_kernels": len([k for k in kernels if k not in matched and k not in unknown]),
        "share": share,  # the candidate's kernels' share of the call's device time (GPU only)
    }
