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
