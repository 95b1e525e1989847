"""The precision policy (docs/taxonomy.md, "Math modes"): a candidate that
computes an fp32 task with lowered precision inside forward (autocast to
fp16/bf16, TF32 switched on by either of torch's APIs) is flagged
`reduced_precision_math`, with what it did in `reduced_precision`, and judged
by its outputs against the tolerance profile like any candidate. Real
workers on the CPU target (autocast exists there too)."""

from __future__ import annotations

import pytest
import torch

from kernelsweep.evaluator.untrusted import mathmodes

FAST = dict(trials=2, timing_trials=3, warmup=0, shape_variants=0)


def test_the_watch_sees_autocast_entered_while_active_and_only_then(monkeypatch):
    monkeypatch.setattr(torch, "set_autocast_dtype", torch.set_autocast_dtype)  # restored afterwards
    watch = mathmodes.AutocastWatch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        pass
    assert watch.seen == set()  # not inside a judged call
    watch.active = True
    with torch.autocast("cpu", enabled=False):
        pass
    assert watch.seen == set()
    with torch.autocast("cpu", dtype=torch.float16):
        pass
    assert watch.seen == {"autocast cpu torch.float16"}  # the dtype entered, not the default before it


def test_lowered_modes_are_named_with_their_values():
    mathmodes.use_strict()
    strict = mathmodes.GlobalSettings.capture()
    assert mathmodes.reduced_precision(strict) == []
    lowered = mathmodes.GlobalSettings({**strict.values, "cuda.matmul.fp32_precision": "tf32",
                                        "float32_matmul_precision": "high"})
    assert mathmodes.reduced_precision(lowered) == ["cuda.matmul.fp32_precision=tf32", "float32_matmul_precision=high"]


@pytest.mark.slow
def test_autocast_in_forward_is_flagged_and_judged_by_its_outputs(run_eval):
    r = run_eval("matmul_small", "autocast_bf16_matmul", **FAST)
    assert r["category"] == "wrong_output", (r["category"], r["error"])  # bf16's rounding, not fp32's
    assert "reduced_precision_math" in r["flags"] and r["reduced_precision"] == ["autocast cpu torch.bfloat16"]
    # autocast around an op it leaves in fp32: flagged, and correct, as its outputs are
    exact = run_eval("add", "autocast_add", **FAST)
    assert exact["category"] == "no_custom_kernel", (exact["category"], exact["error"])
    assert "reduced_precision_math" in exact["flags"] and exact["reduced_precision"] == ["autocast cpu torch.bfloat16"]


@pytest.mark.slow
def test_an_explicit_fp32_region_is_not_flagged(run_eval):
    r = run_eval("matmul_small", "autocast_fp32_region", **FAST)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert "reduced_precision_math" not in r["flags"] and r["reduced_precision"] == []


@pytest.mark.slow
def test_tf32_through_the_newer_switch_is_flagged_not_a_crash(run_eval):
    r = run_eval("matmul_small", "tf32_new_api", **FAST)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert "reduced_precision_math" in r["flags"]
    assert "cuda.matmul.fp32_precision=tf32" in r["reduced_precision"]
    assert "cuda.matmul.fp32_precision" in r["settings_changed"]
