"""Published claims re-judged: every row of a corpus (a `backend: corpus` model,
kernelsweep.models.corpus) with its claimed speedup beside what this study
measured, an outcome and the reason. The contract (docs/results.md, "Published claims"):

- The claim judged: the row's claimed speedup over the model entry's `baseline`
  (eager unless set), as its response record carries both (`meta.corpus`).
- confirmed: the evaluator's verdict is a correct custom kernel, and either the
  claim is no speedup beyond the margin m (claimed <= 1 + m), or the measured
  speedup's 95% interval lies above 1 + m (faster, as claimed).
- refuted: the candidate is at fault (REFUTED_BY: nothing published, does not
  parse or fit the interface, wrong output or shape, wrong on a shape variant, a
  cheat, no custom kernel), or it is a correct custom kernel claimed faster whose
  interval lies wholly at or below 1 + m (no speedup beyond the tie margin).
- not reproducible: this run cannot decide (NOT_REPRODUCIBLE_BY: the build or an
  API failed on this machine's toolchain, a runtime error, crash, out of memory or
  timeout here, a task whose reference ignores its inputs; or no result, no
  timing against the baseline, timings too spread, an interval that straddles 1 + m).
- no claim: the row claims no number for the baseline (CUDA-L1 rows with no code
  claim none); listed, not counted in the three.

Informational: whether the interval reaches the claimed speedup within a factor
MAGNITUDE_FACTOR (the claims were measured on other GPUs); whether the corpus's
reference is the task's (the judge always uses the task's, as every cell does)."""

from __future__ import annotations

import difflib
import json
import math
from pathlib import Path
from typing import Any, Mapping

import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from kernelsweep.study import layout
from kernelsweep.core.fileio import sha256_text
from kernelsweep.models.corpus import MEASURED_BY
from kernelsweep.report.baselines import column_prefix
from kernelsweep.report.collect import Collection
from kernelsweep.report.spec import StudySpec
from kernelsweep.report.tables import NA, Part, Table

OUTCOMES = ("confirmed", "refuted", "not reproducible", "no claim")
COUNTED = OUTCOMES[:3]
MAGNITUDE_FACTOR = 2.0
# The measured comparison a claimed baseline is judged against (report columns speedup_<prefix>).
MEASURED_AS = {claim: column_prefix(mode) for claim, mode in MEASURED_BY.items()}
REFUTED_BY = {
    "no_code": "no code published",
    "syntax_error": "the code does not parse",
    "interface_error": "no ModelNew that fits the task's interface",
    "shape_mismatch": "output of the wrong shape, dtype or structure",
    "wrong_output": "wrong output",
    "wrong_on_variant": "correct on the task's shape, wrong on a shape variant",
    "cheat": "passed numerically by a cheat",
    "no_custom_kernel": "correct, but no custom kernel (plain PyTorch)",
}
NOT_REPRODUCIBLE_BY = {
    "hallucinated_api": "an API missing from this machine's toolchain",
    "compile_error": "the build failed on this machine",
    "timeout": "timed out here",
    "crash": "crashed here",
    "out_of_memory": "out of memory here",
    "runtime_error": "a runtime error here",
    "indistinguishable": "the task's reference ignores its inputs: correctness cannot be told",
    "correct_unstable": "correct custom kernel, timings too spread for a verdict",
}


def _na(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _x(value: float) -> str:
    return f"{value:.3g}×"


def measured_text(cell: Mapping[str, Any], prefix: str) -> str:
    s, lo, hi = (cell.get(f"speedup_{prefix}{k}") for k in ("", "_lo", "_hi"))
    if _na(s):
        return NA
    return _x(s) + ("" if _na(lo) or _na(hi) else f" [{lo:.3g}, {hi:.3g}]")


def judge(claimed: float | None, cell: Mapping[str, Any], margin: float, prefix: str = "eager") -> tuple[str, str]:
    """(outcome, reason) for one claim and the cell that re-measured it."""
    category = None if _na(cell.get("category")) else str(cell.get("category"))
    if not bool(cell.get("has_result")) or category is None:
        why = f"no result here ({cell.get('status')})"
        return ("no claim" if claimed is None else "not reproducible"), why
    if claimed is None:
        return "no claim", f"nothing claimed; here {category}"
    if category in REFUTED_BY:
        return "refuted", f"{category}: {REFUTED_BY[category]}"
    if category in NOT_REPRODUCIBLE_BY:
        return "not reproducible", f"{category}: {NOT_REPRODUCIBLE_BY[category]}"
    measured = measured_text(cell, prefix)
    bound = f"1 + m = {1 + margin:.3g}"
    if claimed <= 1 + margin:
        return "confirmed", f"correct custom kernel; claimed {_x(claimed)} (no speedup), measured {measured}"
    lo, hi = cell.get(f"speedup_{prefix}_lo"), cell.get(f"speedup_{prefix}_hi")
    if _na(lo) or _na(hi):
        return "not reproducible", "correct custom kernel, not timed against the claim's baseline here"
    if lo > 1 + margin:
        return "confirmed", f"correct custom kernel, faster: {measured} lies above {bound}"
    if hi <= 1 + margin:
        return "refuted", f"correct custom kernel, claimed {_x(claimed)}; measured {measured}, not above {bound}"
    return "not reproducible", f"correct custom kernel; timing inconclusive: {measured} straddles {bound}"


def _normalised(code: str) -> list[str]:
    return [line.rstrip() for line in code.strip().splitlines()]


def reference_check(corpus_ref: str | None, task: Mapping[str, Any] | None) -> str:
    """'same', 'not given', 'task record missing', or how the corpus's reference differs from the task's."""
    if not corpus_ref:
        return "not given"
    if not task or not isinstance(task.get("code"), str):
        return "task record missing"
    original = (task.get("scale") or {}).get("original_sha256")
    if original and sha256_text(corpus_ref) == original:
        return "same (before tasks.scale)"
    theirs, ours = _normalised(corpus_ref), _normalised(task["code"])
    if theirs == ours:
        return "same"
    edits = [op for op in difflib.SequenceMatcher(None, theirs, ours, autojunk=False).get_opcodes() if op[0] != "equal"]
    count = sum(max(i2 - i1, j2 - j1) for _, i1, i2, j1, j2 in edits)
    _, i1, i2, j1, j2 = edits[0]
    first = " ".join(f"`{line.strip()}`" for line in theirs[i1:i2][:1]) or "nothing"
    here = " ".join(f"`{line.strip()}`" for line in ours[j1:j2][:1]) or "nothing"
    return f"differs: {count} line(s); first: {first} where the task has {here}"


def _error_line(error: Mapping[str, Any]) -> str:
    """The evaluator's error in one line: its message's first line (which names the type), else the type."""
    lines = str(error.get("message") or "").strip().splitlines()
    return lines[0][:200] if lines else str(error.get("type"))


def corpus_models(spec: StudySpec) -> list[str]:
    return [m for m, entry in spec.models.items() if isinstance(entry, dict) and entry.get("backend") == "corpus"]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def claim_rows(results: Path, collection: Collection) -> pd.DataFrame:
    """One row per cell of a corpus model: the claim, the measurement, outcome and reason."""
    spec = collection.spec
    margin = spec.equivalence_margin
    models = corpus_models(spec)
    rows: list[dict[str, Any]] = []
    if not models or collection.cells.empty:
        return pd.DataFrame(rows)
    tasks: dict[str, dict[str, Any] | None] = {}
    for cell in collection.cells[collection.cells["model"].isin(models)].to_dict("records"):
        folder = results / layout.CAND.format(precision=cell["precision"], model=cell["model"], method=cell["method"],
                                              task=cell["task"], sample=cell["sample"], turn=0, cand=0)
        response = _read(folder / layout.RESPONSE) or {}
        claim = (response.get("meta") or {}).get("corpus") or {}
        # the baseline the record says was judged, else the model entry's
        baseline = claim.get("baseline") or spec.models[cell["model"]].get("baseline") or "eager"
        prefix = MEASURED_AS.get(baseline, column_prefix(baseline))
        evaluation = _read(folder / layout.EVAL) or {}
        if cell["task"] not in tasks:
            tasks[cell["task"]] = _read(results / layout.TASK.format(task=cell["task"]))
        claims = claim.get("claims") or {}
        claimed = claims.get(baseline)
        if not claim:
            outcome, reason = "not reproducible", "no corpus record here (the cell was not generated)"
        else:
            outcome, reason = judge(claimed, cell, margin, prefix)
        error = evaluation.get("error") or {}
        atol, rtol = claim.get("atol"), claim.get("rtol")
        diff = evaluation.get("max_abs_diff")
        if cell.get("category") == "wrong_output" and diff is not None and atol is not None:
            reason += f" (max |diff| {diff:.3g}" + (f", within the claim's atol {atol:g})" if diff <= atol else ")")
        elif error and outcome != "confirmed":
            reason += f" ({_error_line(error)})"
        lo, hi = cell.get(f"speedup_{prefix}_lo"), cell.get(f"speedup_{prefix}_hi")
        row = {k: cell.get(k) for k in ("model", "method", "task", "level", "sample", "status",
                                        "category", "correct", "custom_kernel")}
        row |= {"baseline": baseline, "claimed": claimed,
                "measured": cell.get(f"speedup_{prefix}"), "measured_lo": lo, "measured_hi": hi,
                "verdict": cell.get(f"verdict_{prefix}"), "outcome": outcome, "reason": reason,
                "within_factor": bool(claimed is not None and not _na(hi) and hi >= claimed / MAGNITUDE_FACTOR),
                "claimed_atol": atol, "claimed_rtol": rtol,
                "reference": reference_check(claim.get("ref_code"), tasks[cell["task"]]),
                "source": claim.get("where")}
        for other, value in claims.items():  # every other claim, beside its measurement where the study has one
            if other != baseline:
                row[f"claimed {other}"] = value
                if other in MEASURED_AS:
                    row[f"measured {other}"] = cell.get(f"speedup_{MEASURED_AS[other]}")
        rows.append(row)
    return pd.DataFrame(rows)


def _counts(frame: pd.DataFrame) -> dict[str, Any]:
    claimed = frame[frame["outcome"] != "no claim"]
    out = {"rows": len(frame), "claimed": len(claimed)}
    for outcome in OUTCOMES:
        out[outcome] = int((frame["outcome"] == outcome).sum())
    out["confirmed, within factor"] = int(((frame["outcome"] == "confirmed") & frame["within_factor"]).sum())
    out["reference differs"] = int(frame["reference"].str.startswith("differs").sum())
    return out


def _share(count: int, total: int) -> str:
    return f"{count} ({100 * count / total:.0f} %)" if total else str(count)


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Counts per model and method: overall, then per level."""
    rows = []
    for (model, method), part in frame.groupby(["model", "method"], sort=False):
        for level, sub in [("all", part)] + [(f"L{int(lv)}", g) for lv, g in part.groupby("level", sort=True)]:
            rows.append({"model": model, "method": method, "level": level} | _counts(sub))
    return pd.DataFrame(rows)


def tables(results: Path, collection: Collection) -> list[Table]:
    """The claims summary and the per-row table; [] for a study without a corpus."""
    frame = claim_rows(results, collection)
    if frame.empty:
        return []
    margin = collection.spec.equivalence_margin
    counts = summary(frame)
    view = [{"model": r["model"], "method": r["method"], "level": r["level"], "rows": r["rows"],
             "claimed": r["claimed"]} | {o: _share(r[o], r["claimed"]) for o in COUNTED}
            | {"no claim": r["no claim"],
               f"confirmed, interval reaches claim / {MAGNITUDE_FACTOR:g}": r["confirmed, within factor"],
               "reference differs from the task's": r["reference differs"]}
            for r in counts.to_dict("records")]
    note = (f"Each published row's claimed speedup beside this study's measurement of it. confirmed: a correct "
            f"custom kernel, and the claim is no speedup (at most 1 + m, m = {margin:g}) or the measured 95% interval "
            f"lies above 1 + m. refuted: the candidate is at fault (no code, does not parse or fit, wrong output or "
            f"shape, wrong on a shape variant, cheat, no custom kernel) or a correct custom kernel claimed faster whose "
            f"interval lies at or below 1 + m. not reproducible: this run cannot decide (the build, an API, the run "
            f"failed here, a task that decides nothing, no timing, timings too spread, an interval across 1 + m). "
            f"Percentages of the rows with a claim. The claims were measured on the corpus's own GPU and tolerance: "
            f"'interval reaches claim / {MAGNITUDE_FACTOR:g}' counts confirmed rows whose interval reaches the "
            f"claimed speedup within a factor {MAGNITUDE_FACTOR:g}. Every row is judged against the task's reference; "
            f"the last column counts rows whose own reference differs (docs/results.md, 'Published claims').")
    rows_view = []
    for r in frame.to_dict("records"):
        measured = NA if _na(r["measured"]) else _x(r["measured"]) + (
            "" if _na(r["measured_lo"]) else f" [{r['measured_lo']:.3g}, {r['measured_hi']:.3g}]")
        rows_view.append({"model": r["model"], "task": r["task"] + ("" if r["sample"] == 0 else f" s{r['sample']}"),
                          "claimed": NA if r["claimed"] is None or _na(r["claimed"]) else
                          f"{_x(r['claimed'])} vs {r['baseline']}",
                          "measured [95% interval]": measured, "verdict": r["category"], "outcome": r["outcome"],
                          "reason": r["reason"], "claimed tolerance": NA if _na(r["claimed_atol"]) else
                          f"atol {r['claimed_atol']:g}, rtol {r['claimed_rtol']:g}",
                          "reference": r["reference"]})
    figure_note = ("Figure `figures/claims.svg` (`claims-<precision>` in a study of several precisions): claimed "
                   "against measured speedup per row with its interval, by outcome. The CSV holds every claimed "
                   "baseline of each row, beside its measurement where the study times that baseline.")
    by_verdict = (frame.assign(verdict=frame["category"].fillna("no result"))
                  .groupby(["model", "method", "outcome", "verdict"], sort=True).size().rename("rows").reset_index())
    by_verdict["outcome"] = pd.Categorical(by_verdict["outcome"], OUTCOMES, ordered=True)
    by_verdict = by_verdict.sort_values(["model", "method", "outcome", "rows"], ascending=[True, True, True, False])
    return [Table("claims", "Published claims", note, counts,
                  [Part(None, pd.DataFrame(view)),
                   Part("By the evaluator's verdict", by_verdict.astype({"outcome": str}).reset_index(drop=True))]),
            Table("claims_rows", "Published claims: per row", figure_note, frame,
                  [Part(None, pd.DataFrame(rows_view), "no corpus row")])]


COLOURS = {"confirmed": "tab:green", "refuted": "tab:red", "not reproducible": "tab:gray"}


def figure(frame: pd.DataFrame) -> Figure:
    """Claimed (x) against measured (y) speedup, log-log, one point per timed row with
    its interval; the diagonal is the claim, the horizontal line no speedup."""
    fig = Figure(figsize=(6.4, 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    timed = frame[frame["claimed"].notna() & frame["measured"].notna()] if not frame.empty else frame
    if timed.empty:
        ax.text(0.5, 0.5, "no row both claimed and timed", ha="center", va="center", transform=ax.transAxes)
        ax.set_axis_off()
        return fig
    for outcome, part in timed.groupby("outcome", sort=False):
        x, y = part["claimed"].astype(float), part["measured"].astype(float)
        lo = (y - part["measured_lo"].astype(float)).clip(lower=0).fillna(0)
        hi = (part["measured_hi"].astype(float) - y).clip(lower=0).fillna(0)
        ax.errorbar(x, y, yerr=[lo, hi], fmt="o", ms=4, capsize=2, color=COLOURS.get(outcome, "tab:blue"),
                    label=f"{outcome} ({len(part)})")
    values = pd.concat([timed["claimed"], timed["measured"], timed["measured_lo"].dropna()]).astype(float)
    low, high = max(values.min() / 1.5, 1e-3), values.max() * 1.5
    ax.plot([low, high], [low, high], color="black", lw=0.8, ls="--", label="measured = claimed")
    ax.axhline(1.0, color="black", lw=0.8, ls=":", label="no speedup")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("claimed speedup")
    ax.set_ylabel("measured speedup (95% interval)")
    ax.set_title(f"Published claims re-measured ({len(timed)} of {len(frame)} rows timed)")
    ax.legend(fontsize="small")
    return fig
