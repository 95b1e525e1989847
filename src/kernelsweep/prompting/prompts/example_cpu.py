import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>

torch::Tensor add_tensors(torch::Tensor a, torch::Tensor b) {
    TORCH_CHECK(a.sizes() == b.sizes(), "a and b must have the same shape");
    auto a_c = a.contiguous().to(torch::kFloat);
    auto b_c = b.contiguous().to(torch::kFloat);
    auto out = torch::empty_like(a_c);
    const float* pa = a_c.data_ptr<float>();
    const float* pb = b_c.data_ptr<float>();
    float* po = out.data_ptr<float>();
    const int64_t n = a_c.numel();
    at::parallel_for(0, n, 4096, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = pa[i] + pb[i];
    });
    return out;
}
"""

add_ext = load_inline(name="example_add_cpu", cpp_sources=cpp_source, functions=["add_tensors"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add_ext.add_tensors(a, b)
