"""The timing protocol's own floor (untrusted/clock.py), on the device it runs on:
- an empty forward (returns a preallocated tensor): what the harness adds to
  every timed call (goal on an H200: <= 5 us);
- axpy + ReLU over 2^24 floats as one CUDA kernel (192 MB of traffic): its
  time against the bandwidth floor (bytes / measured copy bandwidth).
Also the same calls timed the old way (a full device synchronize before each
end event), to show what that costs.

    PYTHONPATH=src python3 benchmarks/timing_floor.py [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import torch  # noqa: E402

from kernelsweep.evaluator.untrusted.clock import Clock  # noqa: E402

AXPY = r"""
#include <torch/extension.h>
__global__ void axpy_relu_kernel(const float* x, const float* y, float* out, float a, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) { float v = a * x[i] + y[i]; out[i] = v > 0.f ? v : 0.f; }
}
torch::Tensor axpy_relu(torch::Tensor x, torch::Tensor y, double a) {
    auto out = torch::empty_like(x);
    long n = x.numel();
    axpy_relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), out.data_ptr<float>(), (float)a, n);
    return out;
}
// The same with 16-byte loads and stores (n a multiple of 4): what the memory system can do,
// so the harness's figure is judged against a kernel that can reach the bandwidth.
__global__ void axpy_relu_vec4_kernel(const float4* x, const float4* y, float4* out, float a, long n4) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n4; i += (long)gridDim.x * blockDim.x) {
        float4 p = x[i], q = y[i], r;
        r.x = fmaxf(a * p.x + q.x, 0.f); r.y = fmaxf(a * p.y + q.y, 0.f);
        r.z = fmaxf(a * p.z + q.z, 0.f); r.w = fmaxf(a * p.w + q.w, 0.f);
        out[i] = r;
    }
}
torch::Tensor axpy_relu_vec4(torch::Tensor x, torch::Tensor y, double a) {
    auto out = torch::empty_like(x);
    long n4 = x.numel() / 4;
    int blocks = (int)std::min<long>((n4 + 255) / 256, 132L * 16);
    axpy_relu_vec4_kernel<<<blocks, 256>>>((const float4*)x.data_ptr<float>(), (const float4*)y.data_ptr<float>(),
                                           (float4*)out.data_ptr<float>(), (float)a, n4);
    return out;
}
"""


class Empty(torch.nn.Module):
    def __init__(self, like: torch.Tensor):
        super().__init__()
        self.out = torch.empty_like(like)

    def forward(self, x):
        return self.out


def median_us(clock: Clock, fn, args, calls: int, synchronized: bool) -> float:
    with torch.no_grad():
        clock.block(fn, [args] * 10, synchronized=synchronized)
        return statistics.median(clock.block(fn, [args] * calls, synchronized=synchronized)) * 1e3


def copy_bandwidth(n: int) -> float:
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        dst.copy_(src)
    start.record()
    for _ in range(20):
        dst.copy_(src)
    end.record()
    torch.cuda.synchronize()
    return 2 * n * 4 * 20 / (start.elapsed_time(end) / 1e3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("timing_floor: no CUDA device; nothing to measure", file=sys.stderr)
        return 2
    from torch.utils.cpp_extension import load_inline

    device = torch.device("cuda", 0)
    props = torch.cuda.get_device_properties(device)
    clock = Clock(device, getattr(props, "L2_cache_size", None))
    n = 1 << 24
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    ext = load_inline("ks_axpy_relu", cpp_sources="torch::Tensor axpy_relu(torch::Tensor x, torch::Tensor y, double a);\n"
                      "torch::Tensor axpy_relu_vec4(torch::Tensor x, torch::Tensor y, double a);",
                      cuda_sources=AXPY, functions=["axpy_relu", "axpy_relu_vec4"], verbose=False)
    for fn in (ext.axpy_relu, ext.axpy_relu_vec4):
        assert torch.allclose(fn(x, y, 2.0), torch.relu(2.0 * x + y))
    bw = copy_bandwidth(n * 4)
    floor_us = 3 * n * 4 / bw * 1e6
    rows = []
    for label, fn, fargs in (("empty forward", Empty(x), [x]),
                             ("axpy+relu kernel", lambda a, b: ext.axpy_relu(a, b, 2.0), [x, y]),
                             ("axpy+relu float4", lambda a, b: ext.axpy_relu_vec4(a, b, 2.0), [x, y])):
        rows.append((label, median_us(clock, fn, fargs, args.calls, False),
                     median_us(clock, fn, fargs, args.calls, True)))
    print(f"device {props.name}; copy bandwidth {bw / 1e12:.2f} TB/s; axpy+relu bandwidth floor {floor_us:.1f} us")
    print(f"{'call':20s} {'events (us)':>12s} {'full sync (us)':>15s}")
    for label, ev, sync in rows:
        print(f"{label:20s} {ev:12.1f} {sync:15.1f}")
    for label, ev, _ in rows[1:]:
        print(f"{label}: {ev / floor_us:.2f}x the bandwidth floor (goal <= 1.15)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
