import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_tensors(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    auto a_c = a.contiguous();
    auto b_c = b.contiguous();
    auto out = torch::empty_like(a_c);
    const int64_t n = a_c.numel();
    const int threads = 256;
    const int blocks = (int)((n + threads - 1) / threads);
    add_kernel<<<blocks, threads>>>(a_c.data_ptr<float>(), b_c.data_ptr<float>(), out.data_ptr<float>(), n);
    return out;
}
"""

cpp_source = "torch::Tensor add_tensors(torch::Tensor a, torch::Tensor b);"

add_ext = load_inline(
    name="example_add_cuda",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["add_tensors"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_ext.add_tensors(a, b)
