"""Verdicts that were wrong for reasons of policy, not cheats (published
hand-tuned kernels): each with the look-alike that must keep its verdict.
CPU target, real workers."""

from __future__ import annotations

from evaluator_paths import FIXTURES


def test_a_confined_candidate_has_writable_library_caches(run_eval):
    """CuPy, Numba and friends cache under the home directory by default,
    read-only in the confinement: each evaluation gets its own in the
    candidate's build directory (the fixture writes into each from __init__)."""
    r = run_eval("add", "writes_caches")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert r["provenance"]["confinement"] == "namespaces"


def test_torch_compiles_own_patching_is_not_the_candidates(run_eval):
    r = run_eval("add", "torch_compiled")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert "patched_torch" not in r["flags"] and r["patched"] == [], r["patched"]


def test_a_candidate_patching_torch_is_still_reported(run_eval):
    """Its wrapper carries __wrapped__ to the original, as torch's own do, but
    its code is the candidate's."""
    r = run_eval("add", "patches_torch_add")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert "patched_torch" in r["flags"] and "torch.add" in r["patched"], r["patched"]


def test_weights_folded_at_construction_are_kept(run_eval):
    """A scale folded into the layer's weights in __init__ stays folded (the
    reference's weights are not copied over it)."""
    r = run_eval("linear_scale", "linear_scale_folded")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert r["weights"] == {"same": 0, "changed": 2, "absent": 0}, r["weights"]


def test_weights_made_in_inference_mode_are_kept(run_eval):
    """Inference tensors cannot be written into: the copy crashed them."""
    r = run_eval("linear_scale", "linear_scale_folded_inference")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert r["weights"] == {"same": 0, "changed": 0, "absent": 2}, r["weights"]


def test_a_candidate_that_does_not_fold_the_scale_is_wrong(run_eval):
    """The look-alike: the reference's layer under the same seed, the scale
    forgotten. Its weights are the reference's, its output is not."""
    r = run_eval("linear_scale", "linear_scale_unfolded")
    assert r["category"] == "wrong_output", (r["category"], r["error"])
    assert r["weights"] == {"same": 2, "changed": 0, "absent": 0}, r["weights"]


def test_a_persistent_output_buffer_with_fresh_values_is_correct(run_eval):
    """torch.add(..., out=self.out) into one buffer kept across calls: the
    same tensor every call, the right values in it every time."""
    r = run_eval("add", "out_persistent_buffer")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"], r["flags"])
    assert "reuses_output_storage" in r["flags"] and r["trials_passed"] == 3


def test_a_kernel_writing_into_a_persistent_buffer_is_a_kernel(run_eval, cpu_library):
    r = run_eval("add", "cpp_persistent_buffer")
    assert r["correct"] and r["custom_kernel"], (r["category"], r["error"], r["flags"])
    assert "reuses_output_storage" in r["flags"]


def test_variants_rescale_the_candidates_copy_of_the_task_constants(run_eval):
    """A candidate reading `batch_size = 16` / `dim = 1024`, lines identical
    to the reference's, gets the variant's values as the reference does."""
    r = run_eval("add_sized", "view_task_constants")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert [c["ok"] for c in r["variants"]["checked"]] == [True, True]


def test_a_shape_written_out_still_fails_a_variant(run_eval):
    """The look-alike: the same lines, but the task's numbers in the view."""
    r = run_eval("add_sized", "view_literal_shape")
    assert r["category"] == "wrong_on_variant", (r["category"], r["error"])
    assert r["variants"]["failed"]["name"] == "smaller_odd"
    assert r["variants"]["failed"]["category"] == "runtime_error"


def test_only_constants_the_candidate_assigns_as_the_task_does_are_overridden():
    from kernelsweep.core import shapes

    source = "batch_size = 16\ndim = 256  # a tile, not the task's dim\nN = 7\n"
    assert shapes.shared_overrides(source, {"batch_size": 16, "dim": 1024}, {"batch_size": 9, "dim": 513}) \
        == {"batch_size": 9}
    assert shapes.shared_overrides("x = (", {"batch_size": 16}, {"batch_size": 9}) == {}


def test_a_degenerate_tolerance_task_is_not_a_constant_one(run_eval):
    """The look-alike of a constant reference: a softmax over 32768 values,
    every output within the fp32 atol of every other. Judged with the
    distinguishing atol its outputs do vary: an honest softmax is correct,
    not indistinguishable."""
    r = run_eval("softmax_wide", FIXTURES / "adversarial" / "degenerate_honest.py")
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"], r["flags"])
    assert "degenerate_tolerance" in r["flags"] and "constant_reference" not in r["flags"]
