"""The profile stage on real modules: a real child process, torch.profiler,
FlopCounterMode, real timeouts and kills."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from kernelsweep.profiling import device_peaks
from kernelsweep.profiling import profile_reference, render_for_prompt
from kernelsweep.profiling import roofline
from kernelsweep.profiling.events import analyse

# Fixed peaks so verdicts do not depend on the machine running the tests:
# ridge point = 1e12 / 1e11 = 10 FLOP/byte.
PEAKS = {"peak_flops": 1e12, "peak_bandwidth": 1e11}
FAST = {"warmup": 1, "iters": 3, "timeout_s": 120}

M, K, N = 256, 512, 512  # linear: (M, K) @ (K, N) + bias
# Self times are means over the profiled calls: with 3, one preemption of the
# wrapper (aten::linear, ~µs of its own) on a loaded 2-core machine outweighed
# the GEMM (CI, session 14); over 20 it cannot.
MATMUL = dict(FAST, iters=20)

MATMUL_RELU = f"""
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, k, n):
        super().__init__()
        self.linear = nn.Linear(k, n)

    def forward(self, x):
        return torch.relu(self.linear(x))

def get_inputs():
    return [torch.randn({M}, {K})]

def get_init_inputs():
    return [{K}, {N}]
"""

ELEMENTWISE = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x, y):
        return torch.tanh(x * 2.0 + y)

def get_inputs():
    return [torch.randn(512, 1024), torch.randn(512, 1024)]

def get_init_inputs():
    return []
"""


def write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@pytest.fixture(scope="module")
def matmul_profile(tmp_path_factory):
    ref = write(tmp_path_factory.mktemp("mm"), "matmul_relu.py", MATMUL_RELU)
    return profile_reference(ref, "cpu", **MATMUL, **PEAKS)


def test_matmul_relu_counts_match_hand_count(matmul_profile):
    p = matmul_profile
    assert p["status"] == "ok", p.get("error")
    assert p["flops"]["total"] == 2 * M * K * N
    assert p["flops"]["by_op"] == {"aten.addmm": 2 * M * K * N}
    assert p["flops"]["elementwise_estimate"] == M * N  # the relu; addmm's bias add is inside its count
    fp32 = 4
    inputs, weight, bias, output = M * K * fp32, K * N * fp32, N * fp32, M * N * fp32
    assert p["bytes"]["compulsory"] == inputs + weight + bias + output
    # addmm reads x, W, b and writes y; relu reads y and writes its output.
    assert p["bytes"]["per_op_sum"] == (inputs + weight + bias + output) + 2 * output
    assert p["kernel_count"] == 2  # linear and relu, as called by forward
    assert p["arithmetic_intensity"] == pytest.approx((2 * M * K * N + M * N) / p["bytes"]["compulsory"])


def test_the_record_says_where_the_profiling_time_went(matmul_profile):
    phases = matmul_profile["phase_s"]
    for name in ("import reference", "Model(...).to(device)", "forward (warm-up)", "forward (timing)",
                 "forward (torch.profiler)", "forward (FlopCounterMode)", "forward (byte counting)"):
        assert phases[name] >= 0, (name, phases)
    timed = sum(matmul_profile["time_per_forward_ms"]["samples"]) / 1e3
    assert phases["forward (timing)"] >= timed - 0.001, phases  # the timed forwards lie inside their phase (ms rounding)
    assert sum(phases.values()) <= matmul_profile["wall_s"], (phases, matmul_profile["wall_s"])


def test_matmul_relu_self_times_without_double_counting(matmul_profile):
    p = matmul_profile
    ops = {o["name"]: o for o in p["top_operators"]}
    assert all(o["self_time_us"] >= 0 and 0 <= o["share"] <= 1 for o in p["top_operators"])
    assert p["top_operators_share"] <= 1 + 1e-9
    assert p["top_operators_share"] == pytest.approx(sum(o["share"] for o in p["top_operators"]))
    # linear is a wrapper around addmm: the GEMM time belongs to addmm alone.
    assert "aten::linear" in ops and "aten::addmm" in ops
    assert ops["aten::addmm"]["self_time_us"] > ops["aten::linear"]["self_time_us"]
    if p["operator_count"] <= len(p["top_operators"]):  # every operator listed: shares add up to 1
        assert p["top_operators_share"] == pytest.approx(1.0)
    assert p["time_per_forward_ms"]["n"] == MATMUL["iters"] and p["time_per_forward_ms"]["median"] > 0


def test_matmul_is_compute_bound_against_given_peaks(matmul_profile):
    r = matmul_profile["roofline"]
    assert r["ridge_point"] == pytest.approx(10.0)
    assert matmul_profile["arithmetic_intensity"] > 10
    assert r["verdict"] == "compute-bound"
    assert r["peaks"]["basis"] == "override"


def test_self_times_partition_the_inclusive_time():
    """In-process: the self times of all operators add up exactly to the inclusive
    time of the top-level operators, so nothing is counted twice."""
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    x = torch.randn(32, 64)
    with torch.no_grad():
        model(x)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(2):
                model(x)
    result = analyse(prof.events(), "cpu", forwards=2)
    top_level_inclusive = sum(e.cpu_time_total for e in prof.events()
                              if e.name.startswith("aten::") and e.cpu_parent is None)
    assert result["total_self_time_us"] * 2 == pytest.approx(top_level_inclusive, rel=1e-9)
    assert sum(o["share"] for o in result["operators"]) == pytest.approx(1.0)
    assert result["kernel_count"] == 3  # linear, relu, linear


def test_elementwise_chain_is_memory_bound(tmp_path):
    ref = write(tmp_path, "chain.py", ELEMENTWISE)
    p = profile_reference(ref, "cpu", **FAST, **PEAKS)
    assert p["status"] == "ok", p.get("error")
    numel = 512 * 1024
    assert p["flops"]["total"] == 0  # nothing FlopCounterMode counts
    assert p["flops"]["elementwise_estimate"] == 3 * numel  # mul, add, tanh
    assert p["bytes"]["compulsory"] == 3 * numel * 4
    assert p["kernel_count"] == 3
    assert p["roofline"]["verdict"] == "memory-bound"
    assert p["arithmetic_intensity"] < 1


def test_cli_writes_record_and_prints_summary(tmp_path):
    ref = write(tmp_path, "chain.py", ELEMENTWISE)
    out = tmp_path / "results" / "profile.json"
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "profile", str(ref), "--device", "cpu",
                           "--out", str(out), "--iters", "2", "--warmup", "1", "--task", "L0-900",
                           "--peak-flops", "1T", "--peak-bandwidth", "100G"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rec = json.loads(out.read_text())
    assert rec["schema"] == "kernelsweep/profile/1" and rec["task"] == "L0-900"
    assert rec["roofline"]["peaks"]["flops"] == 1e12 and rec["roofline"]["peaks"]["bandwidth"] == 1e11
    assert "Bound: memory-bound." in proc.stdout
    assert "aten::tanh" in proc.stdout


def test_render_for_prompt_is_compact_and_complete(matmul_profile):
    text = render_for_prompt(matmul_profile)
    assert "aten::addmm" in text
    assert "Per forward: 2 aten operators" in text
    assert "134 MFLOP" in text  # 2 * 256 * 512 * 512
    assert "Bound: compute-bound." in text
    assert len(text.splitlines()) <= 20


def test_forward_that_raises_gives_clear_error_record(tmp_path):
    ref = write(tmp_path, "raises.py", """
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                raise ValueError("deliberate failure in forward")
        def get_inputs(): return [torch.randn(4)]
        def get_init_inputs(): return []
    """)
    p = profile_reference(ref, "cpu", **FAST)
    assert p["status"] == "error"
    assert p["error"]["type"] == "ValueError"
    assert p["error"]["phase"] == "forward (warm-up)"
    assert "deliberate failure in forward" in p["error"]["message"]
    assert "Traceback" in p["error"]["log"]
    assert render_for_prompt(p).startswith("Reference profile unavailable:")


def test_missing_kernelbench_names_are_reported(tmp_path):
    ref = write(tmp_path, "nomodel.py", "x = 1\n")
    p = profile_reference(ref, "cpu", **FAST)
    assert p["status"] == "error" and p["error"]["phase"] == "import reference"
    assert "Model, get_inputs, get_init_inputs" in p["error"]["message"]


def test_hang_is_killed_at_timeout(tmp_path):
    pid_file = tmp_path / "pid"
    ref = write(tmp_path, "hang.py", f"""
        import os, time, torch
        class Model(torch.nn.Module):
            def forward(self, x):
                open({str(pid_file)!r}, "w").write(str(os.getpid()))
                while True:
                    time.sleep(0.1)
        def get_inputs(): return [torch.randn(4)]
        def get_init_inputs(): return []
    """)
    start = time.monotonic()
    p = profile_reference(ref, "cpu", warmup=1, iters=1, timeout_s=6)
    elapsed = time.monotonic() - start
    assert p["status"] == "error" and p["error"]["type"] == "Timeout"
    assert "6 s" in p["error"]["message"]
    assert 6 <= elapsed < 30
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # the hung process is gone


def test_killed_profiling_is_no_record_and_fails_the_job(tmp_path):
    """A process killed from outside (scheduler, OOM killer) is the machine's fault: exit 3, nothing written."""
    ref = write(tmp_path, "killed.py", """
        import os, signal, torch
        class Model(torch.nn.Module):
            def forward(self, x):
                os.kill(os.getpid(), signal.SIGKILL)
        def get_inputs(): return [torch.randn(4)]
        def get_init_inputs(): return []
    """)
    out = tmp_path / "profile.json"
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "profile", str(ref), "--device", "cpu",
                           "--warmup", "1", "--iters", "1", "--out", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 3, proc.stderr
    assert "the machine failed the profiling, nothing was recorded" in proc.stderr and "SIGKILL" in proc.stderr
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_gpu_is_a_clear_error(tmp_path):
    ref = write(tmp_path, "chain.py", ELEMENTWISE)
    p = profile_reference(ref, "cuda", **FAST)
    assert p["status"] == "error" and p["error"]["phase"] == "device"
    assert "--device cuda was requested" in p["error"]["message"]


def test_bad_arguments_exit_2_with_message(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "profile", str(tmp_path / "absent.py"),
                           "--device", "cpu"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "reference file not found" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(ValueError, match="precision"):
        profile_reference(write(tmp_path, "chain.py", ELEMENTWISE), "cpu", precision="int8")


# --- device peaks and verdicts (pure functions) ------------------------------

@pytest.mark.parametrize("name, key", [
    ("NVIDIA H200", "H200"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA H100 80GB HBM3", "H100"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("NVIDIA A100-SXM4-40GB", "A100"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA L40S", "L40S"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"),
    ("Tesla T4", "T4"),
])
def test_gpu_table_matches_whole_names(name, key):
    assert device_peaks.lookup_gpu(name).key == key


def test_unknown_gpu_gets_unknown_verdict_unless_overridden():
    assert device_peaks.lookup_gpu("NVIDIA Future GPU X1") is None
    peaks = roofline.select_peaks("cuda", "NVIDIA Future GPU X1", "fp32", None)
    v = roofline.verdict(1e9, 1e6, peaks)
    assert v["verdict"] == "unknown" and "--peak-flops and --peak-bandwidth" in v["reason"]
    half = roofline.select_peaks("cuda", "NVIDIA Future GPU X1", "fp32", None, peak_flops=1e14)
    assert "--peak-bandwidth" in roofline.verdict(1e9, 1e6, half)["reason"]
    both = roofline.select_peaks("cuda", "NVIDIA Future GPU X1", "fp32", None, 1e14, 1e12)
    assert roofline.verdict(1e9, 1e6, both)["verdict"] == "compute-bound"  # 1000 > ridge 100
    assert roofline.verdict(1e7, 1e6, both)["verdict"] == "memory-bound"   # 10 < 100


def test_h200_peaks_and_precision_choice():
    peaks = roofline.select_peaks("cuda", "NVIDIA H200", "fp32", None)
    assert peaks["flops"] == pytest.approx(67e12) and peaks["bandwidth"] == pytest.approx(4.8e12)
    assert peaks["basis"] == "datasheet" and peaks["measured"]["bandwidth"]["value"] == pytest.approx(4.3e12)
    matmul = {"aten.addmm": 10**9}
    assert roofline.flop_precision("cuda", "fp32", {"matmul": False, "cudnn": True}, matmul)[0] == "fp32"
    assert roofline.flop_precision("cuda", "fp32", {"matmul": True, "cudnn": True}, matmul)[0] == "tf32"
    conv = {"aten.convolution": 10**9}
    assert roofline.flop_precision("cuda", "fp32", {"matmul": False, "cudnn": True}, conv)[0] == "tf32"
    no_bf16 = roofline.select_peaks("cuda", "Tesla V100-SXM2-32GB", "bf16", None)
    assert "no bf16 peak" in no_bf16["reason"]


def test_cpu_estimate_is_labelled():
    peaks = roofline.select_peaks("cpu", device_peaks.cpu_name(), "fp32", 2)
    assert peaks["basis"] == "estimate" and peaks["source"].startswith("generic CPU estimate")
    assert peaks["flops"] > 0 and peaks["bandwidth"] > 0


def test_parse_quantity():
    assert device_peaks.parse_quantity("4.8T") == pytest.approx(4.8e12)
    assert device_peaks.parse_quantity("900G") == pytest.approx(9e11)
    assert device_peaks.parse_quantity("4.8e+12") == pytest.approx(4.8e12)
    for bad in ("fast", "-1", "0"):
        with pytest.raises(ValueError):
            device_peaks.parse_quantity(bad)


def test_under_the_late_claim_the_model_is_built_before_the_device_is_taken(tmp_path, monkeypatch):
    """`gpu-slots run --late` (the profile rule's): the child builds Model on
    the host while the job before still holds the device, and profiles only
    once this process has taken it; the wait does not count against the
    time limit, and the record says how long the device was held."""
    import fcntl
    import threading

    from kernelsweep.runtime import gpu_slots

    built = tmp_path / "built"
    ref = write(tmp_path, "chain_built.py", ELEMENTWISE.replace(
        "    def forward(self, x, y):",
        f"    def __init__(self):\n        super().__init__()\n        open({str(built)!r}, 'w').write('x')\n\n"
        "    def forward(self, x, y):"))
    lock = tmp_path / "slots" / "gpu0.lock"
    lock.parent.mkdir()
    monkeypatch.setenv(gpu_slots.ENV_TIMING_LOCK, str(lock))
    monkeypatch.setenv(gpu_slots.ENV_SLOT, "0")
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the job before is timing
    result: dict = {}
    job = threading.Thread(target=lambda: result.update(
        rec=profile_reference(ref, "cpu", warmup=1, iters=3, timeout_s=15)))
    job.start()
    try:
        deadline = time.monotonic() + 60
        while not built.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert built.exists(), "Model was not built while another job held the device"
        time.sleep(16)  # past the time limit: waiting for the device is not run time
        assert job.is_alive(), result
    finally:
        os.close(holder)
    job.join(120)
    rec = result["rec"]
    assert rec["status"] == "ok", rec.get("error")
    stages = rec["stage_s"]
    assert stages["slot_wait"] >= 15 and stages["warm"] > 0 and 0 < stages["device_held"] < rec["wall_s"], stages
