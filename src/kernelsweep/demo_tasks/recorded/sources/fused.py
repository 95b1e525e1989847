import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/python.h>
#include <algorithm>

torch::Tensor fused_chain(torch::Tensor x, torch::Tensor residual, torch::Tensor offset,
                          double scale, double cap) {
    auto xc = x.contiguous();
    auto rc = residual.contiguous();
    auto oc = offset.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>();
    const float* pr = rc.data_ptr<float>();
    const float* po = oc.data_ptr<float>();
    float* py = out.data_ptr<float>();
    const int64_t cols = oc.numel(), rows = xc.numel() / cols;
    const float s = (float)scale, c = (float)cap;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * cols;
        const float* rr = pr + r * cols;
        float* yr = py + r * cols;
        for (int64_t j = 0; j < cols; ++j) {
            float v = xr[j] * s + rr[j] + po[j];
            v = v > 0.f ? v : 0.f;
            yr[j] = v < c ? v : c;
        }
    }
    return out;
}
"""

ext = load_inline(name="demo_chain_fused", cpp_sources=cpp_source, functions=["fused_chain"], extra_cflags=["-O3"],
                  no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, features, scale, cap):
        super().__init__()
        self.scale = scale
        self.cap = cap
        self.offset = nn.Parameter(torch.linspace(-0.5, 0.5, features))

    def forward(self, x, residual):
        return ext.fused_chain(x, residual, self.offset, self.scale, self.cap)
