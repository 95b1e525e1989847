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
