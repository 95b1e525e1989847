"""Shape variants (kernelsweep.core.shapes) and strict fp32 math modes, end to end
on the CPU target: real workers, real C++ builds. A candidate that hard-codes
the task's shape passes on that shape and is caught on a variant."""

from __future__ import annotations

import pytest

from kernelsweep.core import shapes
from kernelsweep.core.verdict import CATEGORIES, CORRECT_ON_TASK_SHAPE, NUMERICALLY_CORRECT

KERNELBENCH_LIKE = """
import torch
batch_size = 16
in_channels = 3
out_channels = 64
kernel_size = 3
stride = 2
num_groups = 8
dim = 1
M = 1024 * 2
height = width = 32
depth, length = 12, 2
eps = 1e-5
def get_inputs():
    return [torch.randn(batch_size, in_channels, M)]
def get_init_inputs():
    return [in_channels, out_channels, kernel_size]
"""


def test_which_constants_are_sizes_and_how_they_are_rescaled():
    assert shapes.size_constants(KERNELBENCH_LIKE) == {"batch_size": 16, "out_channels": 64, "M": 2048,
                                                       "height": 32, "width": 32, "depth": 12}
    found = shapes.variants(KERNELBENCH_LIKE, 3)
    assert [v["name"] for v in found] == ["smaller_odd", "larger_odd", "quarter_odd"]
    assert found[0]["constants"] == {"batch_size": 9, "out_channels": 33, "M": 1025, "height": 17, "width": 17,
                                     "depth": 7}
    assert found[1]["constants"] == {"batch_size": 21, "out_channels": 81, "M": 2561, "height": 41, "width": 41,
                                     "depth": 15}
    for v in found:
        assert all(n % 2 == 1 and n >= 3 for n in v["constants"].values())
    assert shapes.variants(KERNELBENCH_LIKE, 0) == [] and shapes.variants("x = 2\n", 2) == []
    namespace: dict = {}
    text = shapes.substitute(KERNELBENCH_LIKE, {"M": 7, "batch_size": 5})
    assert "M = 7\n" in text and "batch_size = 5\n" in text and text.count("\n") == KERNELBENCH_LIKE.count("\n")
    exec(compile(text, "t", "exec"), namespace)
    assert (namespace["M"], namespace["batch_size"], namespace["kernel_size"]) == (7, 5, 3)
    text = shapes.substitute(KERNELBENCH_LIKE, found[0]["constants"])
    assert "height = width = 17\n" in text and "depth, length = 7, 2\n" in text
    small, changed = shapes.scaled(KERNELBENCH_LIKE, 0.25)
    assert changed == {"batch_size": [16, 4], "out_channels": [64, 16], "M": [2048, 512], "height": [32, 8],
                       "width": [32, 8], "depth": [12, 3]}
    assert "M = 512\n" in small and "kernel_size = 3\n" in small and shapes.scaled(KERNELBENCH_LIKE, 1.0)[1] == {}


def _failed_variant(r):
    assert r["category"] == "wrong_on_variant", (r["category"], r["error"], r["flags"])
    assert r["category"] in CATEGORIES and r["category"] in CORRECT_ON_TASK_SHAPE
    assert not r["correct"] and r["speedup"] is None and r["trials_passed"] == 3
    failed = r["variants"]["failed"]
    assert failed["constants"] == r["error"]["constants"] and set(failed["constants"]) == {"batch_size", "dim"}
    assert failed["name"] in r["error"]["message"] and "batch_size=" in r["error"]["message"]
    assert r["variants"]["task"] == {"batch_size": 16, "dim": 1024}
    return failed


@pytest.mark.parametrize("candidate, how", [
    ("cpp_fixed_n", "shape_mismatch"),        # #define N and a fixed output shape in C++
    ("cpp_view_task_shape", "runtime_error"),  # a Python-side view to the task's constants
    ("cpp_block_tail", "wrong_output"),        # blocks of 256, the tail skipped
])
def test_hard_coded_shapes_are_wrong_on_a_variant(run_eval, cpu_library, candidate, how):
    r = run_eval("add_sized", candidate)
    failed = _failed_variant(r)
    assert failed["category"] == how and r["error"]["failure"] == how
    assert failed["name"] == "smaller_odd"  # the first variant already fails
    assert r["provenance"]["shape_variants"] == 2 and len(r["provenance"]["seeds"]["variants"]) == 2


def test_a_crash_on_a_variant_is_wrong_on_variant(run_eval):
    failed = _failed_variant(run_eval("add_sized", "segv_off_shape"))
    assert failed["name"] == "smaller_odd" and failed["category"] == "crash", failed


def test_a_single_shape_evaluation_passes_the_hard_coded_kernel(run_eval, cpu_library):
    r = run_eval("add_sized", "cpp_block_tail", shape_variants=0)
    assert r["correct"] and r["category"] in NUMERICALLY_CORRECT, (r["category"], r["error"])
    assert r["variants"] is None and r["provenance"]["shape_variants"] == 0


def test_an_honest_kernel_is_correct_on_every_variant(run_eval, cpu_library):
    r = run_eval("add_sized", "cpp_add")
    assert r["correct"] and r["custom_kernel"], (r["category"], r["error"])
    checked = r["variants"]["checked"]
    assert [c["name"] for c in checked] == ["smaller_odd", "larger_odd"] and all(c["ok"] for c in checked)
    assert checked[0]["constants"] == {"batch_size": 9, "dim": 513}
    assert r["variants"]["dropped"] == [] and r["variants"]["failed"] is None
    assert "variants" in r["stage_s"]


def test_variants_build_modelnew_from_their_own_init_inputs(run_eval):
    r = run_eval("linear_sized", "linear_relu_any_size")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert all(c["ok"] for c in r["variants"]["checked"]) and len(r["variants"]["checked"]) == 2
    assert r["variants"]["checked"][0]["constants"] == {"batch_size": 5, "in_features": 33, "out_features": 17}
    assert all(c["built_ahead"] for c in r["variants"]["checked"])  # in the reference's preparation


def test_a_variant_the_reference_cannot_run_is_dropped(run_eval):
    r = run_eval("add_capped", "pytorch_only")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert r["variants"]["task"] == {"batch_size": 16, "dim": 1024}  # kernel_size is no size
    (dropped,) = r["variants"]["dropped"]
    assert dropped["name"] == "larger_odd" and "ValueError" in dropped["reason"] and "20000" in dropped["reason"]
    assert [c["name"] for c in r["variants"]["checked"]] == ["smaller_odd"]


def test_lowered_fp32_math_modes_are_flagged(run_eval):
    r = run_eval("matmul_small", "tf32_on", shape_variants=0)
    assert "reduced_precision_math" in r["flags"] and "changed_global_settings" in r["flags"]
    assert "float32_matmul_precision" in r["settings_changed"]
    assert "cuda.matmul.allow_tf32" in r["settings_changed"]
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])  # judged at its real accuracy
    plain = run_eval("add", "pytorch_only", shape_variants=0)
    assert "reduced_precision_math" not in plain["flags"] and plain["settings_changed"] == []


def test_a_larger_variant_beyond_the_memory_budget_is_dropped(run_eval, monkeypatch):
    from kernelsweep.evaluator import settings

    # The task's inputs are 128 KiB; the larger variant's 210 KiB exceed both them and this budget.
    monkeypatch.setitem(settings.VARIANT_BYTES, "cpu", 80_000)
    r = run_eval("add_sized", "pytorch_only")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    (dropped,) = r["variants"]["dropped"]
    assert dropped["name"] == "larger_odd" and "variant budget" in dropped["reason"], dropped
    assert [c["name"] for c in r["variants"]["checked"]] == ["smaller_odd"]


def test_a_variant_the_reference_runs_only_with_its_batch_rescaled_is_narrowed(run_eval):
    r = run_eval("group_mean_sized", "group_mean_any_size")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert r["variants"]["task"] == {"batch_size": 16, "channels": 64} and r["variants"]["dropped"] == []
    checked = r["variants"]["checked"]
    assert [c["constants"] for c in checked] == [{"batch_size": 9}, {"batch_size": 21}], checked
    assert all(c["ok"] and "RuntimeError" in c["narrowed"] for c in checked), checked
    # Built ahead with every size rescaled, the reference's Model was built again, narrowed.
    assert not any(c["built_ahead"] for c in checked), checked
    assert all(c["output_handoff"] == "file" for c in checked), checked  # no device buffer on the CPU
