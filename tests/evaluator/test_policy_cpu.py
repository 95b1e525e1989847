"""Verdicts that were wrong for reasons of policy, not cheats (published
hand-tuned kernels): each with the look-alike that must keep its verdict.
CPU target, real workers."""

from __future__ import annotations

from evaluator_paths import CPU


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
