"""Speed of light: how close each correct custom kernel comes to what the GPU can do.

The bound is the profile stage's roofline (kernelsweep.profiling.roofline.
profile_bound_time_s, one definition): the task's counted FLOPs at peak FLOP/s
and its compulsory bytes at peak bandwidth, max of the two, with the peaks the
profile recorded for the device. A candidate's fraction is bound / its median
time in the evaluator; the reference's (eager PyTorch) fraction is shown beside
it, from the same evaluation. A speedup says how much better than eager a
kernel is; the fraction says how much is left: 1.3x faster than eager can still
be 8 % of the bound. Read from `profile/{device}/{task}.json` and the
candidates' eval records; a task without a usable profile, or profiled on
another kind of device than its candidates ran on, gets no fraction (said why)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from kernelsweep.study import layout
from kernelsweep.profiling.roofline import profile_bound_time_s
from kernelsweep.report.collect import Collection
from kernelsweep.report.tables import NA, Part, Table, fmt_speedup


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def bounds(results: Path, collection: Collection) -> dict[str, dict[str, Any]]:
    """task -> profile_bound_time_s of its profile (with 'reason' when there is no bound)."""
    spec = collection.spec
    out = {}
    for task in spec.tasks:
        record = _read(results / layout.PROFILE.format(device=spec.device, precision=spec.precision, task=task.id))
        out[task.id] = profile_bound_time_s(record) if record else {"seconds": None, "reason": "no profile file"}
    return out


def _na(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def rows(results: Path, collection: Collection) -> list[dict[str, Any]]:
    """One row per correct custom kernel (every evaluated candidate, the cells' finals marked)."""
    by_task = bounds(results, collection)
    cells = collection.cells
    finals = {(r["model"], r["method"], r["task"], r["sample"]): (r["best_turn"], r["best_candidate"])
              for r in cells.to_dict("records") if r["status"] == "evaluated"}
    out = []
    candidates = collection.candidates
    success = candidates[candidates["kernel_success"].fillna(False).astype(bool)]
    for c in success.to_dict("records"):
        bound = by_task.get(c["task"]) or {"seconds": None, "reason": "task not in the study"}
        seconds, reason = bound.get("seconds"), bound.get("reason")
        if seconds is not None and bound.get("device_name") and c.get("device_name") \
                and bound["device_name"] != c["device_name"]:
            seconds, reason = None, (f"profiled on {bound['device_name']!r}, evaluated on {c['device_name']!r}")
        bound_ms = None if seconds is None else 1e3 * seconds
        cand_ms, ref_ms = c.get("runtime_ms"), c.get("ref_runtime_ms")
        fraction = bound_ms / cand_ms if bound_ms is not None and not _na(cand_ms) and cand_ms > 0 else None
        ref_fraction = bound_ms / ref_ms if bound_ms is not None and not _na(ref_ms) and ref_ms > 0 else None
        key = (c["model"], c["method"], c["task"], c["sample"])
        out.append({
            "model": c["model"], "method": c["method"], "task": c["task"], "sample": c["sample"],
            "turn": c["turn"], "candidate": c["candidate"],
            "final": finals.get(key) == (c["turn"], c["candidate"]),
            "category": c["category"],
            "speedup_eager": c.get("speedup_eager"), "speedup_eager_lo": c.get("speedup_eager_lo"),
            "speedup_eager_hi": c.get("speedup_eager_hi"), "speedup_compile": c.get("speedup_compile"),
            "runtime_ms": cand_ms, "ref_runtime_ms": ref_ms, "bound_ms": bound_ms,
            "bound_limit": bound.get("limit") if bound_ms is not None else None,
            "fraction_of_bound": fraction, "ref_fraction_of_bound": ref_fraction,
            "peak_precision": bound.get("peak_precision"), "peak_basis": bound.get("peak_basis"),
            "no_bound_reason": None if bound_ms is not None else reason,
        })
    return out


def _pct(value: Any) -> str:
    return NA if _na(value) else f"{100 * value:.1f} %"


def table(results: Path, collection: Collection) -> Table:
    data = rows(results, collection)
    spec = collection.spec
    view = []
    for r in data:
        view.append(({"model": r["model"]} if len(spec.models) > 1 else {}) | {
            "method": r["method"], "task": r["task"] + ("" if spec.samples == 1 else f" s{r['sample']}"),
            "candidate": f"t{r['turn']}/c{r['candidate']}" + (" (final)" if r["final"] else ""),
            "category": r["category"],
            "speedup vs eager": fmt_speedup(r["speedup_eager"], r["speedup_eager_lo"], r["speedup_eager_hi"]),
            "speedup vs torch.compile": fmt_speedup(r["speedup_compile"]),
            "time (ms)": NA if _na(r["runtime_ms"]) else f"{r['runtime_ms']:.4g}",
            "bound (ms)": NA if r["bound_ms"] is None else f"{r['bound_ms']:.4g} ({r['bound_limit']})",
            "% of speed of light": _pct(r["fraction_of_bound"]) if r["bound_ms"] is not None
            else f"n/a: {r['no_bound_reason']}",
            "eager PyTorch % of it": _pct(r["ref_fraction_of_bound"]),
            "peaks": ", ".join(filter(None, (r["peak_basis"], r["peak_precision"]))) or NA,
        })
    note = ("Every correct custom kernel (each evaluated candidate; the cell's final one marked) with the fraction "
            "of the roofline bound it reaches: bound = max(FLOPs / peak FLOP/s, compulsory bytes / peak "
            "bandwidth), from the task's profile (counted FLOPs plus the elementwise estimate; distinct inputs, "
            "parameters and outputs moved once; the device's peaks as the profile recorded them, "
            "kernelsweep.profiling.roofline), divided by the candidate's median time in the evaluator. The "
            "eager reference's fraction, from the same evaluation, is beside it. (memory) / (compute): which "
            "side of the roofline bounds the task. 'peaks': where they come from (datasheet figures are upper bounds, "
            "so 100 % is not reachable; a CPU's are an estimate).")
    return Table("speed_of_light", "Speed of light: correct custom kernels against the roofline bound", note,
                 pd.DataFrame(data), [Part(None, pd.DataFrame(view), "no correct custom kernel in this study")])
