"""Process-wide torch math and threading modes a candidate can flip, and
autocast entered inside a call (AutocastWatch)."""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

# Read where torch refuses to answer: its legacy TF32 getters raise once the newer
# `fp32_precision` switches were set too (the newer ones are read as well, below).
MIXED = "unreadable (legacy and fp32_precision switches mixed)"
# The newer per-backend fp32 switches ("ieee", "tf32", "bf16" or "none": as the parent).
FP32_PRECISION_BACKENDS = ("", "cuda.matmul", "cudnn.conv", "cudnn.rnn", "mkldnn.matmul", "mkldnn.conv",
                           "mkldnn.rnn")
LOWERED = ("tf32", "bf16")


def _read(getter: Callable[[], Any]) -> Any:
    try:
        return getter()
    except RuntimeError:
        return MIXED


def fp32_precisions() -> dict[str, str]:
    """The newer switches, by name (`cuda.matmul.fp32_precision`, ...), where this torch has them."""
    found = {}
    for name in FP32_PRECISION_BACKENDS:
        obj: Any = torch.backends
        try:
            for part in filter(None, name.split(".")):
                obj = getattr(obj, part)
            found[f"{name}.fp32_precision" if name else "fp32_precision"] = str(obj.fp32_precision)
        except (AttributeError, RuntimeError):
            continue
    return found

class GlobalSettings:
    """Process-wide torch switches a candidate can flip (threads, TF32, cuDNN
    modes, determinism), as the candidate's worker reads them (each worker is
    its own process: what the candidate flips never reaches the reference)."""

    def __init__(self, values: dict[str, Any]):
        self.values = values

    @classmethod
    def capture(cls, threads: int | None = None) -> "GlobalSettings":
        """The settings now; `threads`: the thread count to record instead of
        the current one (frame's host-side preparation runs on fewer)."""
        v: dict[str, Any] = {
            "num_threads": torch.get_num_threads() if threads is None else threads,
            "deterministic": torch.are_deterministic_algorithms_enabled(),
            "float32_matmul_precision": _read(torch.get_float32_matmul_precision),
            "default_dtype": str(torch.get_default_dtype()),
            "cudnn.enabled": torch.backends.cudnn.enabled,
            "cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "cudnn.allow_tf32": _read(lambda: torch.backends.cudnn.allow_tf32),
            "cuda.matmul.allow_tf32": _read(lambda: torch.backends.cuda.matmul.allow_tf32),
            "cuda.matmul.allow_fp16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "cuda.matmul.allow_bf16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            **fp32_precisions(),
        }
        return cls(v)

    def differences(self, other: "GlobalSettings") -> list[str]:
        return sorted(k for k in self.values if self.values[k] != other.values.get(k))



# The harness's math modes for fp32, set in both workers before any task or
# candidate code runs: full fp32 matmuls and convolutions (TF32 off). The
# reference is computed this way; a candidate that lowers them is computed
# (and judged) the way it set them, and flagged (reduced_precision_math).
STRICT = {"float32_matmul_precision": "highest", "cuda.matmul.allow_tf32": False, "cudnn.allow_tf32": False}


def use_strict() -> None:
    torch.set_float32_matmul_precision("highest")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False


def reduced_precision(settings: GlobalSettings) -> list[str]:
    """The strict fp32 modes these settings lower, as `name=value` (TF32 on, matmul
    precision below 'highest', a newer fp32_precision switch at tf32 or bf16)."""
    v = settings.values
    lowered = [k for k, strict in STRICT.items() if v.get(k) not in (strict, MIXED)]
    lowered += [k for k in v if k.endswith("fp32_precision") and v[k] in LOWERED]
    return sorted(f"{k}={v[k]}" for k in lowered)


AUTOCAST_DEVICES = ("cpu", "cuda")


class AutocastWatch:
    """Autocast entered while `active` (a judged call runs): torch.set_autocast_dtype,
    which every autocast context calls on entry (torch.autocast, torch.cuda.amp.autocast,
    torch.compile's graphs), is wrapped to look then; `look` also runs around each
    call, for autocast switched on earlier and left on. Installed before any candidate
    code runs (and before the guard's snapshot, so it is no patch of the candidate's);
    it costs nothing per operation. `seen`: "autocast DEVICE DTYPE" strings."""

    def __init__(self) -> None:
        self.active = False
        self.seen: set[str] = set()
        original = torch.set_autocast_dtype

        @functools.wraps(original)
        def set_autocast_dtype(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            if self.active:
                self.look()
            return result

        torch.set_autocast_dtype = set_autocast_dtype

    def look(self) -> None:
        for device in AUTOCAST_DEVICES:
            if torch.is_autocast_enabled(device):
                self.seen.add(f"autocast {device} {torch.get_autocast_dtype(device)}")
