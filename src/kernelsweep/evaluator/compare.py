"""Output comparison: structure, shape, dtype, non-finite values and the
per-precision tolerance. Runs in the reference worker (untrusted/reference.py:
`judge`), on the device, on the outputs the reference kept and the files the
candidate's worker wrote; no candidate code ever runs in that process, so a
candidate patching torch.allclose in its own process changes nothing here.

An element passes when |candidate - reference| <= atol + rtol * |reference|
(torch.allclose's rule), plus the output's rounding allowance where the
tolerance profile has one (settings.TOLERANCE_PROFILES; rounding_errors: the
reference's own distance from its float64 twin). `margin` is the worst
element's |candidate - reference| over its bound: at most 1 passes. Non-finite values must sit at the same positions with
the same value (NaN matches NaN only where the reference is NaN too).
max_rel_diff is |c - r| / max(|r|, atol), so exact zeros in the reference do
not turn it into infinity."""

from __future__ import annotations

import math
from typing import Any

import torch

from kernelsweep.evaluator.settings import ROUNDING_CAP


def _as_wide(t: torch.Tensor) -> torch.Tensor:
    if t.is_complex():
        return t.to(torch.complex128)
    return t.to(torch.float64)


# Elements compared per pass: the widened (float64) copies of a chunk stay
# small, so comparing a big output never allocates a whole widened copy of it,
# and its transient memory is bounded whatever the output's size
# (docs/decisions/2026-12-02-timed-output-checks.md).
CHUNK = 1 << 22


def _compare_tensor(r: torch.Tensor, c: torch.Tensor, atol: float, rtol: float,
                    allowance: float = 0.0) -> dict[str, Any]:
    if r.shape != c.shape:
        return {"ok": False, "kind": "shape",
                "message": f"shape {tuple(c.shape)} where the reference has {tuple(r.shape)}"}
    if r.dtype != c.dtype:
        return {"ok": False, "kind": "dtype", "message": f"dtype {c.dtype} where the reference has {r.dtype}"}
    c = c.to(r.device)  # compared where the reference's output is
    if r.numel() == 0 or torch.equal(r, c):  # bitwise equal: no NaN anywhere, infinities in place
        return {"ok": True, "max_abs": 0.0, "max_rel": 0.0, "margin": 0.0}
    r_flat, c_flat = r.reshape(-1), c.reshape(-1)
    misplaced = 0           # elements non-finite in one output and finite in the other
    nonfinite_differ = False
    bad, max_abs, max_rel, margin = 0, 0.0, 0.0, 0.0
    for i in range(0, r_flat.numel(), CHUNK):
        rw, cw = _as_wide(r_flat[i:i + CHUNK]), _as_wide(c_flat[i:i + CHUNK])
        r_fin, c_fin = torch.isfinite(rw), torch.isfinite(cw)
        all_finite = bool(r_fin.all()) and bool(c_fin.all())
        if not all_finite:
            misplaced += int((r_fin != c_fin).sum())
            nf = ~r_fin
            same = (rw[nf] == cw[nf]) | (torch.isnan(rw[nf]) & torch.isnan(cw[nf]))
            nonfinite_differ = nonfinite_differ or not bool(same.all())
            if misplaced or not bool(r_fin.any()):
                continue
            rw, cw = rw[r_fin], cw[r_fin]
        diff = (cw - rw).abs()
        ref_abs = rw.abs()
        max_abs = max(max_abs, float(diff.max()))
        max_rel = max(max_rel, float((diff / ref_abs.clamp_min(atol)).max()))
        bound = atol + allowance + rtol * ref_abs
        margin = max(margin, float((diff / bound).max()))
        bad += int((diff > bound).sum())
    if misplaced:
        return {"ok": False, "kind": "nonfinite",
                "message": f"{misplaced} elements are NaN/Inf in one output but finite in the other"}
    if nonfinite_differ:
        return {"ok": False, "kind": "nonfinite", "message": "non-finite values differ from the reference"}
    if bad:
        extra = f" + rounding allowance {allowance:.3g}" if allowance else ""
        return {"ok": False, "kind": "values", "max_abs": max_abs, "max_rel": max_rel, "margin": margin,
                "message": f"{bad} of {r.numel()} elements outside atol={atol:g}, rtol={rtol:g}{extra} "
                           f"(max abs diff {max_abs:.3g}, margin {margin:.3g})"}
    return {"ok": True, "max_abs": max_abs, "max_rel": max_rel, "margin": margin}


def _compare_number(r: float, c: Any, atol: float, rtol: float) -> dict[str, Any]:
    if not isinstance(c, (int, float, bool)) or isinstance(c, bool) != isinstance(r, bool):
        return {"ok": False, "kind": "structure", "message": f"{type(c).__name__} where the reference has a number"}
    r, c = float(r), float(c)
    if not (math.isfinite(r) and math.isfinite(c)):
        same = r == c or (math.isnan(r) and math.isnan(c))
        return {"ok": same, "kind": None if same else "nonfinite", "max_abs": 0.0, "max_rel": 0.0,
                "message": None if same else "non-finite scalar differs"}
    diff = abs(c - r)
    bound = atol + rtol * abs(r)
    ok = diff <= bound
    return {"ok": ok, "kind": None if ok else "values", "max_abs": diff, "max_rel": diff / max(abs(r), atol),
            "margin": diff / bound, "message": None if ok else f"scalar {c!r} vs reference {r!r}"}


def compare_outputs(reference: dict[str, Any], candidate: dict[str, Any], atol: float, rtol: float,
                    allowances: list[float] | None = None) -> dict[str, Any]:
    """reference/candidate: {"structure": str, "leaves": [...]} as the workers save them;
    allowances: each leaf's rounding allowance (settings.rounding_allowances), None for none.
    Returns ok, kind (structure|shape|dtype|nonfinite|values|None), message,
    max_abs_diff, max_rel_diff, margin (None where no value was compared)."""
    result: dict[str, Any] = {"ok": True, "kind": None, "message": None, "max_abs_diff": 0.0, "max_rel_diff": 0.0,
                              "margin": 0.0}
    if allowances is not None and len(allowances) != len(reference.get("leaves", [])):
        allowances = None  # another output (a sampled timing check keeps the leaves; anything else: none)
    if reference.get("structure") != candidate.get("structure") or \
            len(reference.get("leaves", [])) != len(candidate.get("leaves", [])):
        result.update(ok=False, kind="structure", max_abs_diff=None, max_rel_diff=None, margin=None,
                      message=f"output structure {candidate.get('structure')!r} where the reference "
                              f"returns {reference.get('structure')!r}")
        return result
    for i, (r, c) in enumerate(zip(reference["leaves"], candidate["leaves"])):
        if isinstance(r, torch.Tensor):
            extra = allowances[i] if allowances is not None else 0.0
            part = _compare_tensor(r, c, atol, rtol, extra) if isinstance(c, torch.Tensor) else {
                "ok": False, "kind": "structure", "message": f"{type(c).__name__} where the reference has a tensor"}
        else:
            part = _compare_number(r, c, atol, rtol)
        if "max_abs" in part:
            result["max_abs_diff"] = max(result["max_abs_diff"] or 0.0, part["max_abs"])
            result["max_rel_diff"] = max(result["max_rel_diff"] or 0.0, part["max_rel"])
            result["margin"] = max(result["margin"] or 0.0, part["margin"])
        if not part["ok"]:
            prefix = f"output {i}: " if len(reference["leaves"]) > 1 else ""
            result.update(ok=False, kind=part["kind"], message=prefix + str(part["message"]))
            if part["kind"] in ("structure", "shape", "dtype", "nonfinite"):
                result["max_abs_diff"] = result["max_rel_diff"] = result["margin"] = None
            return result
    return result


def identical_outputs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Bitwise equality of two saved outputs (NaN equals NaN)."""
    if a.get("structure") != b.get("structure") or len(a["leaves"]) != len(b["leaves"]):
        return False
    for x, y in zip(a["leaves"], b["leaves"]):
        if isinstance(x, torch.Tensor) != isinstance(y, torch.Tensor):
            return False
        if isinstance(x, torch.Tensor):
            if x.shape != y.shape or x.dtype != y.dtype:
                return False
            if x.is_floating_point() or x.is_complex():
                if not bool(((x == y) | (torch.isnan(x) & torch.isnan(y))).all()):
                    return False
            elif not torch.equal(x, y):
                return False
        elif not (x == y or (isinstance(x, float) and math.isnan(x) and isinstance(y, float) and math.isnan(y))):
            return False
    return True


def _magnitude(x: torch.Tensor) -> float:
    """Largest finite |value| of one tensor (0 when it has none), in chunks:
    a whole-tensor float64 copy of a 4 GiB output took seconds on the host.
    abs is exact in a float's own dtype; integers and complex numbers widen
    (the most negative integer's abs overflows in its own type)."""
    flat, maxima = x.reshape(-1), []
    for i in range(0, flat.numel(), CHUNK):
        part = flat[i:i + CHUNK]
        part = part.abs() if part.is_floating_point() else _as_wide(part).abs()
        part = part[torch.isfinite(part)]
        if part.numel():
            maxima.append(part.max())
    return float(torch.stack(maxima).max()) if maxima else 0.0


def max_magnitude(output: dict[str, Any]) -> float:
    """Largest finite |value| of an output (0 when empty)."""
    best = 0.0
    for x in output["leaves"]:
        if isinstance(x, torch.Tensor):
            if x.numel() and x.dtype != torch.bool:
                best = max(best, _magnitude(x))
        elif isinstance(x, (int, float)) and math.isfinite(float(x)):
            best = max(best, abs(float(x)))
    return best


def zeros_would_pass(output: dict[str, Any], atol: float, rtol: float) -> bool:
    """Would an all-zero output of the same shape pass against this one? True
    when every finite value is within atol of zero (the tolerance cannot tell
    an answer from nothing: a degenerate task)."""
    tensors = [x for x in output["leaves"] if isinstance(x, torch.Tensor) and x.numel()]
    return bool(tensors) and all(max_magnitude({"leaves": [t]}) <= atol for t in tensors)


def distinguishing_tolerance(magnitudes: list[float], atol: float) -> float:
    """The absolute tolerance used on a degenerate task: a thousandth of the
    smallest largest-magnitude (max_magnitude) of its outputs, so an all-zero
    or constant output fails while rounding differences still pass (rtol stays)."""
    smallest = min(magnitudes, default=0.0)
    return min(atol, smallest * 1e-3) if smallest > 0 else atol


def rounding_errors(output: dict[str, Any], wide: dict[str, Any]) -> list[float]:
    """Per leaf of OUTPUT (the reference at the evaluation's precision), its
    largest finite |output - wide|, WIDE being the same module computed in
    float64 on the same inputs: the reference's own rounding error. 0 for
    leaves that are not floating tensors. ValueError when WIDE is not the
    same output (another structure or shape: the float64 twin computed
    something else) or when a difference is beyond rounding (ROUNDING_CAP of
    the leaf's largest magnitude: a comparison that flipped, a random draw)."""
    if output["structure"] != wide["structure"] or len(output["leaves"]) != len(wide["leaves"]):
        raise ValueError("the float64 reference returns another structure")
    errors = []
    for i, (r, w) in enumerate(zip(output["leaves"], wide["leaves"])):
        if not (isinstance(r, torch.Tensor) and r.is_floating_point() and r.numel()):
            errors.append(0.0)
            continue
        if not isinstance(w, torch.Tensor) or w.shape != r.shape:
            raise ValueError(f"the float64 reference's output {i} is not a tensor of shape {tuple(r.shape)}")
        worst, magnitude = 0.0, 0.0
        r_flat, w_flat = r.reshape(-1), w.reshape(-1).to(r.device)
        for j in range(0, r_flat.numel(), CHUNK):
            rw, ww = _as_wide(r_flat[j:j + CHUNK]), _as_wide(w_flat[j:j + CHUNK])
            finite = torch.isfinite(rw) & torch.isfinite(ww)
            if bool(finite.any()):
                worst = max(worst, float((rw[finite] - ww[finite]).abs().max()))
                magnitude = max(magnitude, float(ww[finite].abs().max()))
        if worst > ROUNDING_CAP * magnitude:
            raise ValueError(f"output {i} differs from its float64 twin by {worst:.3g} at a largest magnitude of "
                             f"{magnitude:.3g}: beyond rounding (a comparison that flipped, a random draw)")
        errors.append(worst)
    return errors

