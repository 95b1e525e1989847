import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/python.h>

// direct 3x3 convolution, ReLU and 2x2 max pooling in one loop nest: no intermediate tensors
torch::Tensor conv_relu_pool(torch::Tensor x, torch::Tensor weight, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto bc = bias.contiguous();
    const int64_t N = xc.size(0), C = xc.size(1), H = xc.size(2), W = xc.size(3);
    const int64_t O = wc.size(0), K = wc.size(2), pad = K / 2;
    auto out = torch::empty({N, O, H / 2, W / 2}, xc.options());
    const float* px = xc.data_ptr<float>();
    const float* pw = wc.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* py = out.data_ptr<float>();
    for (int64_t n = 0; n < N; ++n)
        for (int64_t o = 0; o < O; ++o)
            for (int64_t ph = 0; ph < H / 2; ++ph)
                for (int64_t pw_ = 0; pw_ < W / 2; ++pw_) {
                    float best = 0.f;  // ReLU: the maximum is never below zero
                    for (int64_t dy = 0; dy < 2; ++dy)
                        for (int64_t dx = 0; dx < 2; ++dx) {
                            const int64_t h = ph * 2 + dy, w = pw_ * 2 + dx;
                            float acc = pb[o];
                            for (int64_t c = 0; c < C; ++c)
                                for (int64_t ky = 0; ky < K; ++ky)
                                    for (int64_t kx = 0; kx < K; ++kx) {
                                        const int64_t ih = h + ky - pad, iw = w + kx - pad;
                                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                        acc += px[((n * C + c) * H + ih) * W + iw] *
                                               pw[((o * C + c) * K + ky) * K + kx];
                                    }
                            best = acc > best ? acc : best;
                        }
                    py[((n * O + o) * (H / 2) + ph) * (W / 2) + pw_] = best;
                }
    return out;
}
"""

ext = load_inline(name="demo_conv_direct", cpp_sources=cpp_source, functions=["conv_relu_pool"], extra_cflags=["-O3"],
                  no_implicit_headers=True)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return ext.conv_relu_pool(x, self.conv.weight, self.conv.bias)
