"""The eval record (docs/results.md): one blank, one way to finish it. Used
by the evaluation and by the evaluate stage for candidates that never run
(a stopped turn, a failed model call)."""

from __future__ import annotations

import json
from typing import Any

from kernelsweep.core.verdict import NUMERICALLY_CORRECT

SCHEMA = "kernelsweep/eval/2"


def blank(cfg: Any = None, src: Any = None) -> dict[str, Any]:
    """A record with every field; `cfg` (EvalSettings) and `src` (SourceInfo) fill what they know."""
    static = None
    if src is not None and cfg is not None:
        from kernelsweep.evaluator import source

        static = dict(src.evidence, defines_kernel=source.defines_kernel(src.evidence, cfg.device))
    return {
        "schema": SCHEMA, "category": None, "compiled": None, "correct": False, "custom_kernel": False,
        "kernel_evidence": {"static": static, "launched": None, "share": None},
        "speedup": None, "speedup_ci": None, "timing_verdict": None, "faster": None,
        "runtime_ms": None, "ref_runtime_ms": None,
        "max_abs_diff": None, "max_rel_diff": None, "trials_passed": 0,
        "error": None, "flags": [], "wall_s": 0.0, "compile_s": 0.0, "build_in_hold_s": 0.0,
        "device": getattr(cfg, "device", None), "precision": getattr(cfg, "precision", None),
        "stage_s": {}, "gpu_s": None, "builds": [], "provenance": {},
        "variants": None, "settings_changed": [], "reduced_precision": [], "weights": None,
        "tolerance": tolerance(cfg),
    }


def tolerance(cfg: Any = None) -> dict[str, Any]:
    """How the outputs are compared (docs/taxonomy.md, "Tolerance profiles"): the profile,
    its atol/rtol at the evaluation's precision, under a scaled profile the reference's
    rounding error and the allowance per output leaf, the trials its float64 twin ran on
    (`rounding_trials`) (or the `fallback`: why the plain bound
    applies), and the `margin`: the worst element's |c - r| over its bound, among the
    correctness trials and shape variants (at most 1 passes; null when none was compared)."""
    return {"profile": getattr(cfg, "tolerance", None), "atol": getattr(cfg, "atol", None),
            "rtol": getattr(cfg, "rtol", None), "rounding": None, "allowance": None, "rounding_trials": None,
            "fallback": None,
            "margin": None}


def weights_kept(reference: dict[str, list], candidate: Any) -> dict[str, int] | None:
    """Of the reference's weights (untrusted/trees.weight_digests: shape, dtype,
    digest by name), how many ModelNew holds identically (`same`: the same
    shape, dtype and bytes, under the same name or another), holds changed
    (`changed`: a tensor of that name, but other values or another shape, e.g.
    a scale folded in, a layout changed) or lacks (`absent`). Informational:
    the candidate's digests come from its own process. None when it sent none."""
    if not isinstance(candidate, dict):
        return None
    theirs = {str(k): json.dumps(v) for k, v in list(candidate.items())[:100_000]}
    held = set(theirs.values())
    counts = {"same": 0, "changed": 0, "absent": 0}
    for name, digest in reference.items():
        mine = json.dumps(digest)
        kind = "same" if digest[2] is not None and mine in held else "changed" if name in theirs else "absent"
        counts[kind] += 1
    return counts


def finish(record: dict[str, Any], category: str, error: dict[str, Any] | None, *, flags: list[str],
           stage_s: dict[str, float], device: str | None, wall_s: float,
           provenance: dict[str, Any]) -> dict[str, Any]:
    record["category"] = category
    record["error"] = error
    record["correct"] = category in NUMERICALLY_CORRECT
    record["flags"] = sorted(set(flags))
    record["wall_s"] = round(wall_s, 3)
    stamp_stages(record, stage_s, device)
    record["provenance"] = provenance
    return record


def stamp_stages(record: dict[str, Any], stage_s: dict[str, float], device: str | None) -> None:
    """The stage times, again once the workers have exited (their wall times
    come last). GPU time: from the device's claim (`gpu-slots run --late`:
    `device_held`), else the whole evaluation, as both workers hold the device
    from their start."""
    record["stage_s"] = {k: round(v, 3) for k, v in stage_s.items()}
    if device == "cuda":
        record["gpu_s"] = round(stage_s.get("device_held", record["wall_s"]), 3)
