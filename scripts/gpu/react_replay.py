"""Write the replayed react trajectory for the GPU check (scripts/gpu_react_replay.sh):
KernelBench L2-012 (Gemm_Multiply_LeakyReLU) on CUDA, text protocol, seven replies:
write a fused epilogue kernel, write and run a test script, profile the candidate,
submit it (a working kernel), then the failure study's "optimization" with its
`if (idx batch_size)` bug submitted twice. Expected with the default guards:
regression_lock keeps submission 1, repeat_error stops the trajectory at the
second identical compile error, and the result is submission 1.

    python scripts/gpu/react_replay.py OUT.jsonl [--short]
--short: one reply, the working kernel submitted at once (one nvcc build; for a
device budget of a few minutes).
"""

from __future__ import annotations

import json
import sys

GOOD = r'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void scale_leaky_relu_kernel(float* __restrict__ x, float multiplier, float slope, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float v = x[i] * multiplier;
        x[i] = v > 0.f ? v : v * slope;
    }
}

torch::Tensor scale_leaky_relu_(torch::Tensor x, double multiplier, double slope) {
    TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat,
                "x must be a contiguous float32 CUDA tensor");
    const int64_t n = x.numel();
    const int threads = 256;
    const int64_t wanted = (n + threads - 1) / threads;
    const int blocks = (int)(wanted < 65535 ? wanted : 65535);
    scale_leaky_relu_kernel<<<blocks, threads>>>(x.data_ptr<float>(), (float)multiplier, (float)slope, n);
    return x;
}
"""

cpp_source = "torch::Tensor scale_leaky_relu_(torch::Tensor x, double multiplier, double slope);"

ext = load_inline(name="react_gpu_scale_leaky_relu", cpp_sources=cpp_source, cuda_sources=cuda_source,
                  functions=["scale_leaky_relu_"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, multiplier, negative_slope):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features)
        self.multiplier = multiplier
        self.negative_slope = negative_slope

    def forward(self, x):
        y = self.gemm(x).contiguous()  # cuBLAS GEMM, then the epilogue fused in one pass, in place
        return ext.scale_leaky_relu_(y, self.multiplier, self.negative_slope)
'''

# The failure study's broken record: a missing comparison operator.
BROKEN = GOOD.replace(
    "    for (; i < n; i += stride) {",
    "    int batch_size = (int)n;\n    int idx = (int)i;\n    if (idx batch_size) {}\n    for (; i < n; i += stride) {",
).replace("react_gpu_scale_leaky_relu", "react_gpu_scale_leaky_relu_v2")

TEST = '''import torch
from reference import Model, get_inputs, get_init_inputs
from model_new import ModelNew

torch.manual_seed(0)
ref = Model(*get_init_inputs()).cuda()
torch.manual_seed(0)
new = ModelNew(*get_init_inputs()).cuda()
x = get_inputs()[0].cuda()
with torch.no_grad():
    a, b = ref(x), new(x)
print("max abs diff", (a - b).abs().max().item())
print("allclose", torch.allclose(a, b, atol=1e-4, rtol=1e-4))
'''


def fence(code: str) -> str:
    return f"```python\n{code}```"


REPLIES = [
    "<think>GEMM stays in cuBLAS; fuse multiply and LeakyReLU into one pass.</think>\n"
    f"Action: write_file\npath: model_new.py\n{fence(GOOD)}",
    f"Action: write_file\npath: test_kernel.py\n{fence(TEST)}",
    "Action: run\npath: test_kernel.py",
    "Action: profile\ntarget: candidate",
    "Action: submit",
    "<think>Simplify the bounds check to make it even faster.</think>\n"
    f"Action: submit\n{fence(BROKEN)}",
    f"Action: submit\n{fence(BROKEN)}",
]


def main() -> None:
    with open(sys.argv[1], "w") as f:
        replies = [f"Action: submit\n{fence(GOOD)}"] if "--short" in sys.argv[2:] else REPLIES
        for turn, text in enumerate(replies):
            f.write(json.dumps({"task": "L2-012", "turn": turn, "role": "agent", "raw_response": text}) + "\n")


if __name__ == "__main__":
    main()
