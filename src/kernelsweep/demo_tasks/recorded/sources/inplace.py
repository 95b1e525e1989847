import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/python.h>
#include <algorithm>

torch::Tensor fused_chain_(torch::Tensor x, torch::Tensor residual, torch::Tensor offset,
                           double scale, double cap) {
    // in place: reuse x's memory for the result (x must be contiguous)
    auto rc = residual.contiguous();
    auto oc = offset.contiguous();
    float* px = x.data_ptr<float>();
    const float* pr = rc.data_ptr<float>();
    const float* po = oc.data_ptr<float>();
    const int64_t cols = oc.numel(), n = x.numel();
    const float s = (float)scale, c = (float)cap;
    for (int64_t i = 0; i < n; ++i) {
        float v = px[i] * s + pr[i] + po[i % cols];
        v = v > 0.f ? v : 0.f;
        px[i] = v < c ? v : c;
    }
    return x;
}
"""

ext = load_inline(name="demo_chain_inplace", cpp_sources=cpp_source, functions=["fused_chain_"], extra_cflags=["-O3"],
                  no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, features, scale, cap):
        super().__init__()
        self.scale = scale
        self.cap = cap
        self.offset = nn.Parameter(torch.linspace(-0.5, 0.5, features))

    def forward(self, x, residual):
        return ext.fused_chain_(x, residual, self.offset, self.scale, self.cap)
