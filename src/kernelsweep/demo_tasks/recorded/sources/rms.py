import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/python.h>
#include <cmath>

torch::Tensor rms_norm(torch::Tensor x, torch::Tensor gain, double eps) {
    auto xc = x.contiguous();
    auto gc = gain.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>();
    const float* pg = gc.data_ptr<float>();
    float* py = out.data_ptr<float>();
    const int64_t cols = xc.size(-1), rows = xc.numel() / cols;
    for (int64_t r = 0; r < rows; ++r) {
        const float* xr = px + r * cols;
        float* yr = py + r * cols;
        double ss = 0.0;
        for (int64_t j = 0; j < cols; ++j) ss += (double)xr[j] * xr[j];
        const float inv = 1.0f / std::sqrt((float)(ss / cols) + (float)eps);
        for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * inv * pg[j];
    }
    return out;
}
"""

ext = load_inline(name="demo_rms_norm", cpp_sources=cpp_source, functions=["rms_norm"], extra_cflags=["-O3"],
                  no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, x):
        return ext.rms_norm(x, self.gain, self.eps)
