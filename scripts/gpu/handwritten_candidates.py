"""Hand-written CUDA candidates for four KernelBench level-2 tasks (a GEMM with a
fusable epilogue), as replay files for the GPU check of the whole DAG
(scripts/gpu_dag_run.sh): zero_shot gets the fused-epilogue kernel; iterative
turn 0 is a plain PyTorch rewrite (no_custom_kernel) and turn 1 the kernel,
except on L2-029 where turn 1 does not compile, so selection must keep turn 0.

    python scripts/gpu/handwritten_candidates.py OUT_DIR   # writes zero_shot/guided/iterative.jsonl
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

# task -> (constructor signature, constructor body, forward in PyTorch, epilogue as C on v, scalar args)
TASKS = {
    "L2-009": ("in_features, out_features, subtract_value, multiply_value",
               "self.linear = nn.Linear(in_features, out_features)\n        self.a = float(subtract_value)\n        self.b = float(multiply_value)",
               "torch.relu((self.linear(x) - self.a) * self.b)",
               "v = (v - a) * b; v = v > 0.f ? v : 0.f;", "self.linear(x)"),
    "L2-012": ("in_features, out_features, multiplier, negative_slope",
               "self.gemm = nn.Linear(in_features, out_features)\n        self.a = float(multiplier)\n        self.b = float(negative_slope)",
               "torch.nn.functional.leaky_relu(self.gemm(x) * self.a, self.b)",
               "v = v * a; v = v > 0.f ? v : v * b;", "self.gemm(x)"),
    "L2-029": ("in_features, out_features",
               "self.linear = nn.Linear(in_features, out_features)\n        self.a = 0.0\n        self.b = 0.0",
               "torch.nn.functional.mish(torch.nn.functional.mish(self.linear(x)))",
               "v = v * tanhf(log1pf(expf(v))); v = v * tanhf(log1pf(expf(v)));", "self.linear(x)"),
    "L2-076": ("in_features, out_features, bias_shape",
               "self.gemm = nn.Linear(in_features, out_features, bias=False)\n        self.bias = nn.Parameter(torch.randn(bias_shape))\n        self.a = 0.0\n        self.b = 0.0",
               "torch.relu(self.gemm(x) + self.bias)",
               "v = v + bias[i % cols]; v = v > 0.f ? v : 0.f;", "self.gemm(x)"),
}

KERNEL = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void epilogue_kernel(float* y, const float* bias, int64_t n, int64_t cols, float a, float b) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i];
        EPILOGUE
        y[i] = v;
    }
}

torch::Tensor fused_epilogue(torch::Tensor y, torch::Tensor bias, double a, double b) {
    TORCH_CHECK(y.is_cuda() && y.is_contiguous() && y.scalar_type() == torch::kFloat, "y: contiguous float CUDA");
    const int64_t n = y.numel();
    const int64_t cols = y.size(-1);
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    epilogue_kernel<<<blocks, threads>>>(y.data_ptr<float>(), bias.defined() && bias.numel() ? bias.data_ptr<float>() : nullptr,
                                         n, cols, (float)a, (float)b);
    return y;
}
"""

cpp_source = "torch::Tensor fused_epilogue(torch::Tensor y, torch::Tensor bias, double a, double b);"

ext = load_inline(name="NAME", cpp_sources=cpp_source, cuda_sources=cuda_source, functions=["fused_epilogue"])


class ModelNew(nn.Module):
    def __init__(self, SIGNATURE):
        super().__init__()
        BODY

    def forward(self, x):
        bias = self.bias if hasattr(self, "bias") else torch.empty(0, device=x.device)
        return ext.fused_epilogue(GEMM.contiguous(), bias, self.a, self.b)
'''

PLAIN = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, SIGNATURE):
        super().__init__()
        BODY

    def forward(self, x):
        return FORWARD
'''


def fill(template: str, **values: str) -> str:
    for key, value in values.items():
        template = template.replace(key, value)
    return template


def kernel_candidate(task: str, broken: bool = False) -> str:
    signature, body, _, epilogue, gemm = TASKS[task]
    if broken:  # a typo the compiler must reject
        epilogue = epilogue.replace("v = v", "v = v +* ", 1)
    name = f"ks_{task.replace('-', '_').lower()}_epilogue" + ("_v2" if broken else "")
    return fill(KERNEL, EPILOGUE=epilogue, NAME=name, SIGNATURE=signature, BODY=body, GEMM=gemm)


def plain_candidate(task: str) -> str:
    signature, body, forward, _, _ = TASKS[task]
    return fill(PLAIN, SIGNATURE=signature, BODY=body, FORWARD=forward)


def response(code: str) -> str:
    return f"Here is the module.\n\n```python\n{code}```\n"


def main(out: str) -> int:
    out_dir = Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    for method in ("zero_shot", "guided"):  # guided differs in its prompt only; same answers
        with open(out_dir / f"{method}.jsonl", "w") as f:
            for task in TASKS:
                f.write(json.dumps({"task": task, "turn": 0, "raw_response": response(kernel_candidate(task))}) + "\n")
    with open(out_dir / "iterative.jsonl", "w") as f:
        for task in TASKS:
            f.write(json.dumps({"task": task, "turn": 0, "raw_response": response(plain_candidate(task))}) + "\n")
            turn1 = kernel_candidate(task, broken=(task == "L2-029"))
            f.write(json.dumps({"task": task, "turn": 1, "raw_response": response(turn1)}) + "\n")
    print(f"wrote replay files in {out_dir} for {', '.join(TASKS)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else ".gpu_carry/replay"))
