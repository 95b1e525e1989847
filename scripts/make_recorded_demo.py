"""Writes src/kernelsweep/demo_tasks/recorded/<method>.jsonl: the demo's recorded
responses (written by hand, not by a model) for the four demo tasks (the demo
config runs L0-001 and L0-003, which between them show every family), in the
replay format (kernelsweep.models.replay). Run it after editing a source below:
    python scripts/make_recorded_demo.py
Each source is a family a real study meets; the category each one gets on the
CPU is in src/kernelsweep/demo_tasks/recorded/README.md (and tested in
tests/workflow/test_run_server.py)."""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/kernelsweep/demo_tasks/recorded"

HEAD = "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"

# --- L0-001 Scale_Add_ReLU_Chain ------------------------------------------------

CHAIN_MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, features, scale, cap):
        super().__init__()
        self.scale = scale
        self.cap = cap
        self.offset = nn.Parameter(torch.linspace(-0.5, 0.5, features))

    def forward(self, x, residual):
        return ext.{fn}(x, residual, self.offset, self.scale, self.cap)
'''


def chain(body: str, fn: str, name: str) -> str:
    return (HEAD + f'\ncpp_source = r"""\n#include <torch/extension.h>\n#include <algorithm>\n\n{body}"""\n\n'
            f'ext = load_inline(name="{name}", cpp_sources=cpp_source, functions=["{fn}"], extra_cflags=["-O3"])\n'
            + CHAIN_MODEL.format(fn=fn))


# correct, one pass instead of five: faster
CHAIN_FUSED = chain('''torch::Tensor fused_chain(torch::Tensor x, torch::Tensor residual, torch::Tensor offset,
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
''', "fused_chain", "demo_chain_fused")

# std::min of a float and a double: does not compile
CHAIN_COMPILE_ERROR = chain('''torch::Tensor fused_chain(torch::Tensor x, torch::Tensor residual, torch::Tensor offset,
                          double scale, double cap) {
    auto xc = x.contiguous();
    auto rc = residual.contiguous();
    auto oc = offset.contiguous();
    auto out = torch::empty_like(xc);
    const float* px = xc.data_ptr<float>();
    const float* pr = rc.data_ptr<float>();
    const float* po = oc.data_ptr<float>();
    float* py = out.data_ptr<float>();
    const int64_t cols = oc.numel(), n = xc.numel();
    for (int64_t i = 0; i < n; ++i) {
        float v = px[i] * scale + pr[i] + po[i % cols];
        py[i] = std::min(std::max(v, 0.f), cap);
    }
    return out;
}
''', "fused_chain", "demo_chain_bad")

# correct numbers, written into the caller's input to save an allocation: a cheat
CHAIN_IN_PLACE = chain('''torch::Tensor fused_chain_(torch::Tensor x, torch::Tensor residual, torch::Tensor offset,
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
''', "fused_chain_", "demo_chain_inplace")

# --- L0-002 RMSNorm_Rows ----------------------------------------------------------

RMS_MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, features, eps):
        super().__init__()
        self.eps = eps
        self.gain = nn.Parameter(torch.linspace(0.5, 1.5, features))

    def forward(self, x):
        return ext.rms_norm(x, self.gain, self.eps)
'''


def rms(inv: str, name: str) -> str:
    body = '''torch::Tensor rms_norm(torch::Tensor x, torch::Tensor gain, double eps) {
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
        const float inv = INV;
        for (int64_t j = 0; j < cols; ++j) yr[j] = xr[j] * inv * pg[j];
    }
    return out;
}
'''.replace("INV", inv)
    return (HEAD + f'\ncpp_source = r"""\n#include <torch/extension.h>\n#include <cmath>\n\n{body}"""\n\n'
            f'ext = load_inline(name="{name}", cpp_sources=cpp_source, functions=["rms_norm"], extra_cflags=["-O3"])\n'
            + RMS_MODEL)


RMS_CORRECT = rms("1.0f / std::sqrt((float)(ss / cols) + (float)eps)", "demo_rms_norm")
# forgot the square root: wrong output
RMS_WRONG = rms("1.0f / ((float)(ss / cols) + (float)eps)", "demo_rms_norm_nosqrt")

# --- L0-003 Gemm_Bias_GELU_Scale --------------------------------------------------

GEMM_PLAIN = '''import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, out_scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.out_scale = out_scale

    def forward(self, x):
        # addmm with the bias folded in, then GELU and the scale in place
        y = torch.addmm(self.linear.bias, x, self.linear.weight.t())
        return F.gelu(y, approximate="tanh").mul_(self.out_scale)
'''

GEMM_EPILOGUE = HEAD + '''
cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

// the GEMM stays with PyTorch (BLAS); GELU(tanh) and the scale run as one in-place pass over its output
torch::Tensor linear_gelu_scale(torch::Tensor x, torch::Tensor weight, torch::Tensor bias, double scale) {
    auto y = torch::addmm(bias, x, weight.t()).contiguous();
    float* p = y.data_ptr<float>();
    const int64_t n = y.numel();
    const float k0 = 0.7978845608028654f, k1 = 0.044715f, s = (float)scale;
    for (int64_t i = 0; i < n; ++i) {
        const float v = p[i];
        p[i] = 0.5f * v * (1.0f + std::tanh(k0 * (v + k1 * v * v * v))) * s;
    }
    return y;
}
"""

ext = load_inline(name="demo_gemm_gelu", cpp_sources=cpp_source, functions=["linear_gelu_scale"],
                  extra_cflags=["-O3"])


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, out_scale):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.out_scale = out_scale

    def forward(self, x):
        return ext.linear_gelu_scale(x, self.linear.weight, self.linear.bias, self.out_scale)
'''
# the same pass without the scale: wrong output (the GEMM and GELU are right)
GEMM_WRONG = GEMM_EPILOGUE.replace(" * s;\n", ";\n", 1).replace('"demo_gemm_gelu"', '"demo_gemm_gelu_noscale"', 1)
assert GEMM_WRONG.count("demo_gemm_gelu_noscale") == 1 and " * s;" not in GEMM_WRONG


# --- L0-004 Conv3x3_ReLU_MaxPool --------------------------------------------------

CONV_MODEL = '''

class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, padding=kernel_size // 2)

    def forward(self, x):
        return ext.conv_relu_pool(x, self.conv.weight, self.conv.bias)
'''


def conv(accumulate: str, name: str) -> str:
    body = '''// direct 3x3 convolution, ReLU and 2x2 max pooling in one loop nest: no intermediate tensors
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
ACCUMULATE
                                    }
                            best = acc > best ? acc : best;
                        }
                    py[((n * O + o) * (H / 2) + ph) * (W / 2) + pw_] = best;
                }
    return out;
}
'''.replace("ACCUMULATE", accumulate)
    return (HEAD + f'\ncpp_source = r"""\n#include <torch/extension.h>\n\n{body}"""\n\n'
            f'ext = load_inline(name="{name}", cpp_sources=cpp_source, functions=["conv_relu_pool"], '
            'extra_cflags=["-O3"])\n' + CONV_MODEL)


ACC_OK = ("                                        acc += px[((n * C + c) * H + ih) * W + iw] *\n"
          "                                               pw[((o * C + c) * K + ky) * K + kx];")
# a pointer where a value belongs: does not compile
ACC_BAD = ("                                        const float* xv = px[((n * C + c) * H + ih) * W + iw];\n"
           "                                        acc += xv * pw[((o * C + c) * K + ky) * K + kx];")
CONV_SLOW = conv(ACC_OK, "demo_conv_direct")
CONV_COMPILE_ERROR = conv(ACC_BAD, "demo_conv_bad")


# --- the replies ------------------------------------------------------------------

def reply(prose: str, code: str) -> str:
    return f"{prose}\n\n```python\n{code}```\n"


T1, T2, T3, T4 = "L0-001", "L0-002", "L0-003", "L0-004"
R = {
    "fused": reply("Fuse the five elementwise passes into one C++ loop over the rows.", CHAIN_FUSED),
    "chain_bad": reply("One fused C++ loop for the whole chain.", CHAIN_COMPILE_ERROR),
    "inplace": reply("Fuse the chain and write the result into x to avoid allocating an output.", CHAIN_IN_PLACE),
    "rms": reply("One pass per row for the sum of squares, one for the scaled output.", RMS_CORRECT),
    "rms_wrong": reply("A C++ row loop: sum of squares, then normalise and apply the gain.", RMS_WRONG),
    "gemm_plain": reply("Fold the bias into addmm and apply GELU in place.", GEMM_PLAIN),
    "gemm": reply("Keep the GEMM in BLAS and fuse GELU and the scale into one pass over its output.", GEMM_EPILOGUE),
    "gemm_noscale": reply("Keep the GEMM in BLAS and apply GELU in one pass over its output.", GEMM_WRONG),
    "conv": reply("A direct convolution with ReLU and pooling fused, no intermediate tensors.", CONV_SLOW),
    "conv_bad": reply("A direct convolution with ReLU and pooling fused.", CONV_COMPILE_ERROR),
}

# method -> task -> turn -> [candidate replies]
GENERATOR = {
    "zero_shot": {T1: [["fused"]], T2: [["rms_wrong"]], T3: [["gemm_plain"]], T4: [["conv_bad"]]},
    "guided": {T1: [["inplace"]], T2: [["rms"]], T3: [["gemm"]], T4: [["conv"]]},
    "iterative": {T1: [["chain_bad"], ["fused"]], T2: [["rms_wrong"], ["rms"]], T3: [["gemm_noscale"], ["gemm"]],
                  T4: [["conv_bad"], ["conv"]]},
    # best-of-2; a cell whose turn 0 is already faster stops there (goal `faster`)
    "agentic": {T1: [["chain_bad", "fused"], ["fused", "chain_bad"]], T2: [["rms_wrong", "rms"], ["rms", "rms_wrong"]],
                T3: [["gemm_plain", "gemm"], ["gemm", "gemm_plain"]], T4: [["conv_bad", "conv"], ["conv", "conv_bad"]]},
}
ROLES = {
    "analyzer": "The forward pass is memory-bound: several elementwise passes that one fused loop can replace.",
    "researcher": "C++ extensions: read contiguous float pointers, loop over rows, write one output tensor.",
    "feedback": "Fix the reported error first; keep the fused structure; check every output element.",
}
REACT = {T1: "fused", T2: "rms", T3: "gemm", T4: "conv"}


def rows():
    for method, tasks in GENERATOR.items():
        out = []
        for task, turns in tasks.items():
            for turn, cands in enumerate(turns):
                for cand, name in enumerate(cands):
                    out.append({"task": task, "turn": turn, "cand": cand, "raw_response": R[name],
                                "finish_reason": "stop", "recorded": name})
            if method == "agentic":
                out.append({"task": task, "turn": 0, "role": "analyzer", "raw_response": ROLES["analyzer"]})
                out.append({"task": task, "turn": 0, "role": "researcher", "raw_response": ROLES["researcher"]})
                for turn in range(len(turns)):
                    out.append({"task": task, "turn": turn, "role": "feedback", "raw_response": ROLES["feedback"]})
        yield method, out
    out = []
    for task, name in REACT.items():
        code = R[name].split("```python\n", 1)[1].rsplit("```", 1)[0]
        out.append({"task": task, "turn": 0, "role": "agent", "recorded": name,
                    "raw_response": f"Action: submit\n```python\n{code}```\n"})
        out.append({"task": task, "turn": 1, "role": "agent", "raw_response": "Action: submit\n"})
    yield "react", out


def main(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for method, records in rows():
        with open(out / f"{method}.jsonl", "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
    sources = out / "sources"
    sources.mkdir(exist_ok=True)
    for name, text in R.items():
        (sources / f"{name}.py").write_text(text.split("```python\n", 1)[1].rsplit("```", 1)[0])


if __name__ == "__main__":
    import sys

    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
