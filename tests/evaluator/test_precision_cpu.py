"""Evaluations at bf16 on the CPU target, real builds and workers: the
reference, its weights and its inputs are cast to bf16 (as KernelBench does)
and judged with bf16's tolerance (docs/taxonomy.md, "Precision")."""

from __future__ import annotations

from kernelsweep.evaluator.settings import TOLERANCES
from kernelsweep.core.verdict import SUCCESS_CATEGORIES


def test_a_kernel_for_every_dtype_is_correct_at_bf16(run_eval):
    r = run_eval("add", "cpp_add_any_dtype", precision="bf16")
    assert r["precision"] == "bf16" and (r["provenance"]["atol"], r["provenance"]["rtol"]) == TOLERANCES["bf16"]
    assert r["category"] in SUCCESS_CATEGORIES, (r["category"], r["error"])
    assert r["correct"] and r["custom_kernel"] and r["trials_passed"] == 3


def test_computing_in_fp32_and_returning_fp32_is_wrong_only_below_fp32(run_eval, cpu_library):
    # The same candidate: right at fp32, a wrong output dtype at bf16 (values close, dtype not).
    assert run_eval("add", "fp32_compute")["category"] in SUCCESS_CATEGORIES
    r = run_eval("add", "fp32_compute", precision="bf16")
    assert r["category"] == "shape_mismatch" and not r["correct"], (r["category"], r["error"])
    assert "torch.float32" in r["error"]["message"] and "torch.bfloat16" in r["error"]["message"]
