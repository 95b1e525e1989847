"""Tolerance profiles (docs/taxonomy.md, "Tolerance profiles"): `ours` widens
KernelBench's fp32 bound by the reference's own rounding error, measured
against its float64 twin, so the same maths summed in another order passes
while a dropped bias or the wrong batch-norm mode still fails; `kb` is
KernelBench's 1e-4, `kb-v0` its 1e-2. Real modules, real workers."""

from __future__ import annotations

import pytest
import torch

from kernelsweep.evaluator import HarnessError, compare, evaluate, settings
from kernelsweep.evaluator.cli import Eval

FAST = dict(trials=2, timing_trials=3, warmup=0, shape_variants=0)


def _out(*leaves):
    return {"structure": "t" * len(leaves), "leaves": list(leaves)}


# ------------------------------------------------------------ the comparison ---

def test_the_allowance_widens_the_bound_and_the_margin_measures_it():
    r = torch.tensor([0.0, 1.0, -2.0])
    c = r + torch.tensor([3e-4, 0.0, 0.0])
    plain = compare.compare_outputs(_out(r), _out(c), 1e-4, 1e-4)
    assert not plain["ok"] and plain["kind"] == "values" and plain["margin"] == pytest.approx(3.0, rel=1e-3)
    widened = compare.compare_outputs(_out(r), _out(c), 1e-4, 1e-4, [4e-4])
    assert widened["ok"] and widened["margin"] == pytest.approx(3e-4 / 5e-4, rel=1e-3)
    assert compare.compare_outputs(_out(r), _out(r.clone()), 1e-4, 1e-4)["margin"] == 0.0
    shape = compare.compare_outputs(_out(r), _out(r[:2]), 1e-4, 1e-4, [1.0])
    assert shape["kind"] == "shape" and shape["margin"] is None


def test_rounding_errors_are_the_references_distance_from_float64():
    torch.manual_seed(0)
    a, b = torch.randn(64, 8192), torch.randn(8192, 16)
    r, wide = a @ b, a.double() @ b.double()
    errors = compare.rounding_errors(_out(r, torch.arange(3)), _out(wide, torch.arange(3)))
    assert errors[0] == pytest.approx(float((r.double() - wide).abs().max())) and errors[0] > 0
    assert errors[1] == 0.0  # not a floating tensor: no allowance
    assert settings.rounding_allowances(errors) == [settings.ROUNDING_FACTOR * e for e in errors]


def test_a_float64_twin_beyond_rounding_or_of_another_shape_is_refused():
    x = torch.randn(100)
    flipped = x.double().clone()
    flipped[3] += 1.0  # a comparison that went the other way in float64
    with pytest.raises(ValueError, match="beyond rounding"):
        compare.rounding_errors(_out(x), _out(flipped))
    with pytest.raises(ValueError, match="shape"):
        compare.rounding_errors(_out(x), _out(x.double()[:50]))


def test_the_profiles_and_their_bounds():
    assert settings.EvalSettings().tolerance == "ours" == settings.TOLERANCE_DEFAULT
    assert (settings.EvalSettings(tolerance="kb").atol, settings.EvalSettings(tolerance="kb").rtol) == (1e-4, 1e-4)
    v0 = settings.EvalSettings(tolerance="kb-v0")
    assert (v0.atol, v0.rtol) == (1e-2, 1e-2) and not v0.profile.scaled
    # ours keeps KernelBench's bound as its floor: the allowance only adds to it
    assert settings.TOLERANCE_PROFILES["ours"].bounds == settings.TOLERANCES
    with pytest.raises(HarnessError, match="tolerance must be one of ours, kb, kb-v0"):
        evaluate("ref.py", "cand.py", tolerance="loose")


def test_the_cli_takes_a_profile():
    import argparse

    parser = argparse.ArgumentParser()
    Eval.configure(parser)
    assert parser.parse_args(["r.py", "c.py"]).tolerance == "ours"
    assert parser.parse_args(["r.py", "c.py", "--tolerance", "kb-v0"]).tolerance == "kb-v0"
    with pytest.raises(SystemExit):
        parser.parse_args(["r.py", "c.py", "--tolerance", "loose"])


# ------------------------------------------------------ whole evaluations ---

@pytest.mark.slow
def test_a_reordered_long_reduction_fails_1e4_and_passes_ours(run_eval):
    kb = run_eval("matmul_long_k", "matmul_blocked", tolerance="kb", **FAST)
    assert kb["category"] == "wrong_output", (kb["category"], kb["error"])
    assert kb["tolerance"]["profile"] == "kb" and kb["tolerance"]["margin"] > 1
    assert kb["tolerance"]["allowance"] is None and kb["provenance"]["tolerance"] == "kb"

    ours = run_eval("matmul_long_k", "matmul_blocked", **dict(FAST, shape_variants=1))
    assert ours["category"] == "no_custom_kernel", (ours["category"], ours["error"])
    tol = ours["tolerance"]
    assert tol["profile"] == "ours" and tol["fallback"] is None
    assert (tol["atol"], tol["rtol"]) == (1e-4, 1e-4)
    assert tol["rounding"][0] > 1e-4  # fp32's own rounding exceeds KernelBench's bound here
    assert tol["allowance"] == [settings.ROUNDING_FACTOR * tol["rounding"][0]]
    assert tol["rounding_trials"] == FAST["trials"] + 1  # a small output: on every trial (one more: the perturbed one)
    assert 0 < tol["margin"] <= 1
    checked = ours["variants"]["checked"]
    assert checked and checked[0]["ok"] and 0 < checked[0]["margin"] <= 1 and "rounding_off" not in checked[0]


@pytest.mark.slow
def test_a_dropped_bias_fails_ours_and_passes_kb_v0(run_eval):
    ours = run_eval("linear_long_bias", "linear_bias_dropped", **FAST)
    assert ours["category"] == "wrong_output", (ours["category"], ours["error"])
    assert ours["tolerance"]["margin"] > 10 and ours["tolerance"]["allowance"][0] < 1e-4
    # 1e-2, the bound the claims were made at, cannot tell the bias from rounding
    v0 = run_eval("linear_long_bias", "linear_bias_dropped", tolerance="kb-v0", **FAST)
    assert v0["category"] == "no_custom_kernel", (v0["category"], v0["error"])
    assert v0["tolerance"]["profile"] == "kb-v0" and v0["tolerance"]["margin"] <= 1
    # the honest look-alike: the bias kept, the reduction reordered
    honest = run_eval("linear_long_bias", "linear_blocked", **FAST)
    assert honest["category"] == "no_custom_kernel", (honest["category"], honest["error"])


@pytest.mark.slow
def test_batch_norm_in_the_wrong_mode_fails_ours_and_passes_kb_v0(run_eval):
    ours = run_eval("batchnorm_train", "batchnorm_eval_mode", **FAST)
    assert ours["category"] == "wrong_output", (ours["category"], ours["error"])
    v0 = run_eval("batchnorm_train", "batchnorm_eval_mode", tolerance="kb-v0", **FAST)
    assert v0["category"] == "no_custom_kernel", (v0["category"], v0["error"])
    honest = run_eval("batchnorm_train", "batchnorm_batch_stats", **FAST)
    assert honest["category"] == "no_custom_kernel", (honest["category"], honest["error"])
    assert honest["tolerance"]["margin"] <= 1 and honest["tolerance"]["fallback"] is None


@pytest.mark.slow
def test_without_a_float64_measure_the_plain_bound_applies_and_the_record_says_why(run_eval):
    r = run_eval("fp32_attribute", "fp32_attribute_same", **FAST)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    tol = r["tolerance"]
    assert tol["profile"] == "ours" and tol["allowance"] is None and tol["rounding"] is None
    assert tol["fallback"].startswith("RuntimeError") and "dtype" in tol["fallback"]
    assert 0 <= tol["margin"] <= 1


@pytest.mark.slow
def test_a_large_outputs_rounding_is_measured_on_the_first_trial_only(run_eval):
    """Beyond ROUNDING_EVERY_TRIAL_ELEMENTS the float64 twin runs once: its
    largest error over millions of elements varies little between draws."""
    r = run_eval("vector_add", "pytorch_only", **dict(FAST, trials=3))
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    tol = r["tolerance"]
    assert 1 << 22 > settings.ROUNDING_EVERY_TRIAL_ELEMENTS
    assert tol["rounding_trials"] == 1 and tol["rounding"][0] > 0 and tol["fallback"] is None, tol
