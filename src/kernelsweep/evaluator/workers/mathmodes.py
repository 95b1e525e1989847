"""Process-wide torch math and threading modes a candidate can flip."""

from __future__ import annotations

from typing import Any

import torch

class GlobalSettings:
    """Process-wide torch switches a candidate can flip (threads, TF32, cuDNN
    modes, determinism). The timing worker gives the reference the harness's
    settings and the candidate its own, so flipping them cannot slow the
    reference down."""

    def __init__(self, values: dict[str, Any]):
        self.values = values

    @classmethod
    def capture(cls, threads: int | None = None) -> "GlobalSettings":
        """The settings now; `threads`: the thread count to record instead of
        the current one (frame's host-side preparation runs on fewer)."""
        v: dict[str, Any] = {
            "num_threads": torch.get_num_threads() if threads is None else threads,
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
    """The strict fp32 modes these settings lower (TF32 on, matmul precision below 'highest')."""
    return sorted(k for k, v in STRICT.items() if settings.values.get(k) != v)
