"""Baseline modes timed beside eager: each mode's worker times it interleaved with
eager on the same inputs, so its ratio to eager carries no drift between workers;
modes that need a GPU are skipped on the CPU with a reason; and 'faster than a mode'
is decided from the interval, on real records (real workers, real torch.compile)."""

from __future__ import annotations

import time

import pytest

from kernelsweep.core import metrics
from kernelsweep.evaluator import settings
from kernelsweep.evaluator.baseline import CPU_SKIPS, run_baseline
from kernelsweep.report.baselines import Baseline, Comparator, parse_baseline

# Every call sleeps longer the later it runs (the machine's drift, made large): 5 ms plus
# 5 ms per second since the test began. The sleep is kept out of torch.compile, so eager
# and the compiled forward drift alike.
DRIFTING = """
import time
import torch
import torch.nn as nn

T0 = __T0__


@torch.compiler.disable
def drift():
    time.sleep(0.005 * (1.0 + (time.time() - T0)))


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        drift()
        return x * 2 + 1


def get_inputs():
    return [torch.randn(64, 64)]


def get_init_inputs():
    return []
"""
MODES = ["eager", "inductor-default", "inductor-reduce-overhead", "cuda-graph", "cudnn-benchmark"]


@pytest.fixture(scope="module")
def drifting_record(tmp_path_factory):
    folder = tmp_path_factory.mktemp("drift")
    reference = folder / "drifting.py"
    reference.write_text(DRIFTING.replace("__T0__", repr(time.time())))
    return run_baseline(reference, device="cpu", modes=MODES, timing_trials=20, warmup=2, timeout_s=300.0,
                        log_dir=folder / "logs")


def test_each_mode_is_timed_beside_eager_and_its_ratio_carries_no_drift(drifting_record):
    modes = drifting_record["modes"]
    eager, default = modes["eager"], modes["inductor-default"]
    assert eager["status"] == "ok" and default["status"] == "ok", (eager, default)
    assert eager.get("paired_eager_ms") is None and "vs_eager" not in eager  # eager is the anchor itself
    paired = default["paired_eager_ms"]
    assert paired["n"] == default["runtime_ms"]["n"] == 20 and len(paired["samples"]) == 20
    ratio = default["vs_eager"]
    assert ratio["paired"] is True
    lo, hi = ratio["speedup_ci"]
    assert lo <= ratio["speedup"] <= hi
    assert ratio["speedup"] == pytest.approx(metrics.speedup(paired["samples"], default["runtime_ms"]["samples"]))
    # The compile mode's worker ran seconds after eager's: its calls sleep longer. Beside the
    # eager timed in its own worker, the mode is as slow as eager (the sleep dominates both)...
    assert 0.75 < ratio["speedup"] < 1.33, ratio
    # ...while against the eager mode's worker, timed earlier, it would look much slower.
    apart = metrics.speedup(eager["runtime_ms"]["samples"], default["runtime_ms"]["samples"])
    assert apart < 0.6 * ratio["speedup"], (apart, ratio)


def test_modes_that_need_a_gpu_are_skipped_on_the_cpu_with_their_reason(drifting_record):
    modes = drifting_record["modes"]
    assert list(modes) == MODES  # the order asked for
    for mode in ("inductor-reduce-overhead", "cuda-graph", "cudnn-benchmark"):
        assert modes[mode]["status"] == "skipped" and modes[mode]["reason"] == CPU_SKIPS[mode], modes[mode]
        assert modes[mode]["runtime_ms"] is None and "vs_eager" not in modes[mode]
    assert "CUDA" in modes["cuda-graph"]["reason"] and "cuDNN" in modes["cudnn-benchmark"]["reason"]
    assert set(CPU_SKIPS) <= set(settings.BASELINE_MODES)


def _against(baseline: Baseline, mode: str, reference: list[float], candidate: list[float],
             margin: float = metrics.EQUIVALENCE_MARGIN) -> dict:
    comparator = Comparator((mode,), tuple(m for m in (mode,) if m in settings.COMPILE_MODES), margin)
    row: dict = {}
    comparator.fill(row, {"correct": True, "category": "correct_tie", "runtime_ms": {"samples": candidate},
                          "ref_runtime_ms": {"samples": reference}}, baseline)
    comparator.resolve()
    return row


def test_faster_than_a_mode_is_decided_from_the_interval_on_a_real_record(drifting_record):
    """The candidate's evaluation is played by the record's own samples: its reference the
    eager timed beside inductor-default, the candidate inductor-default's times scaled."""
    baseline = parse_baseline("L0-000", drifting_record, tuple(MODES))
    assert baseline.anchor_for("inductor-default") == drifting_record["modes"]["inductor-default"][
        "paired_eager_ms"]["samples"]  # the comparison goes through the eager timed beside the mode
    eager = baseline.paired["inductor-default"]
    mode = baseline.samples["inductor-default"]
    same = _against(baseline, "inductor-default", eager, mode)
    assert same["speedup_inductor_default"] == pytest.approx(1.0)
    lo, hi = same["speedup_inductor_default_lo"], same["speedup_inductor_default_hi"]
    assert lo < 1.0 < hi and same["verdict_inductor_default"] == "tie"  # as fast as the mode: a tie
    assert same["verdict_compile"] == "tie" and same["best_compile_mode"] == "inductor-default"
    # 0.5% faster than the mode, the interval across 1 + m: a tie, not "faster" from the point estimate
    nudged = _against(baseline, "inductor-default", eager, [t / 1.005 for t in mode])
    assert nudged["speedup_inductor_default"] > 1.0 and nudged["verdict_inductor_default"] == "tie"
    clearly = _against(baseline, "inductor-default", eager, [t / 3 for t in mode])
    assert clearly["speedup_inductor_default_lo"] > 1.01 and clearly["verdict_inductor_default"] == "faster"
    slower = _against(baseline, "inductor-default", eager, [t * 3 for t in mode])
    assert slower["speedup_inductor_default_hi"] < 1 / 1.01 and slower["verdict_inductor_default"] == "slower"
