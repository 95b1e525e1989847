"""The study's tables: numbers per group (CSV) and their formatted view
(Markdown via tabulate 'github', and HTML for the Snakemake report). Each table
states its denominator."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from kernelsweep.core import verdict
from kernelsweep.core.fileio import write_atomic
from kernelsweep.report import aggregate
from kernelsweep.report.aggregate import FAST_P, Summaries, flag, groups, with_result
from kernelsweep.report.baselines import BEST_COMPILE
from kernelsweep.report.collect import FAILED_STATUSES
from kernelsweep.report.spec import StudySpec

NA = "n/a"


@dataclass
class Part:
    title: str | None
    frame: pd.DataFrame  # formatted text
    empty_note: str = "no data"


@dataclass
class Table:
    name: str  # file stem under tables/
    title: str
    note: str
    data: pd.DataFrame  # numbers, written as CSV
    parts: list[Part] = field(default_factory=list)


# --- formatting -------------------------------------------------------------

def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def fmt_pct(value: Any, lo: Any = None, hi: Any = None) -> str:
    if _missing(value):
        return NA
    text = f"{value:.1f}"
    return text if _missing(lo) else f"{text} [{lo:.1f}, {hi:.1f}]"


def fmt_delta(value: Any, lo: Any = None, hi: Any = None) -> str:
    if _missing(value):
        return NA
    text = f"{value:+.1f}"
    return text if _missing(lo) else f"{text} [{lo:+.1f}, {hi:+.1f}]"


def fmt_speedup(value: Any, lo: Any = None, hi: Any = None, n: Any = None) -> str:
    if _missing(value):
        return NA
    text = f"{value:.2f}x"
    if not _missing(lo):
        text += f" [{lo:.2f}, {hi:.2f}]"
    return text if _missing(n) else f"{text} (n={int(n)})"


def fmt_cells(s: dict[str, Any]) -> str:
    text = str(s["cells_with_result"])
    return text + (f" ({s['cells_missing']} missing)" if s["cells_missing"] else "")


def _row_key(spec: StudySpec, model: str, method: str) -> dict[str, str]:
    return ({"model": spec.model_label(model)} if len(spec.models) > 1 else {}) | {"method": method}


def _pct(s: dict[str, Any], name: str) -> str:
    return fmt_pct(s[f"{name}_pct"], s[f"{name}_lo"], s[f"{name}_hi"])


def _verdicts(s: dict[str, Any], against: str) -> str:
    text = f"{s[f'faster_{against}']} / {s[f'tie_{against}']} / {s[f'slower_{against}']}"
    untimed = s[f"untimed_{against}"]
    return text + (f" (+{untimed} untimed)" if untimed else "")


COMMON_NOTE = (
    "Each cell (model x method x task x sample) contributes its final, best candidate. Rates are percentages of "
    "the cells with a final result (averaged over a task's samples, then over tasks), with 95% percentile-"
    "bootstrap intervals that resample tasks. Missing cells (no final.json) are left out of every denominator "
    "and listed in REPORT.md; cells that ended without a candidate count as not successful."
)
COMPILE_NOTE = (
    "Against torch.compile the reference is, per task, the measured compile mode ({modes}) with the largest "
    "speedup over eager. The baseline stage timed each mode in another process, interleaved with eager, so the "
    "speedup is taken through eager PyTorch, timed in both: (eager / candidate, in the evaluator) / (eager / compile "
    "mode, in the baseline stage); this cancels drift of absolute times between processes (the drift check in "
    "REPORT.md shows its size). Only tasks with a usable compile baseline and an eager to go through count."
)


# --- tables -----------------------------------------------------------------

def headline(cells: pd.DataFrame, spec: StudySpec, summaries: Summaries | None = None) -> Table:
    summaries = summaries or Summaries(cells)
    rows, correctness, speed = [], [], {a: [] for a in aggregate.AGAINST}
    for model, method, _ in groups(cells, spec):
        s = summaries(model, method)
        rows.append({"model": model, "method": method, **s})
        key = _row_key(spec, model, method)
        correctness.append(key | {
            "cells": fmt_cells(s), "compiled %": _pct(s, "compiled"),
            "correct on the task's shape %": _pct(s, "correct_task_shape"),
            "correct % (incl. plain PyTorch)": _pct(s, "correct"),
            "correct custom kernel %": _pct(s, "kernel_success"),
            "correct plain PyTorch": f"{s['plain_pytorch_correct']} ({fmt_pct(s['plain_pytorch_pct'])}%)",
            "cheats": s["cheats"],
        })
        for against in aggregate.AGAINST:
            speed[against].append(key | {"cells": s[f"cells_{against}"]}
                                  | {f"fast_{p:g} %": _pct(s, f"fast_{p:g}_{against}") for p in FAST_P}
                                  | {"faster / tie / slower": _verdicts(s, against),
                                     "geomean speedup": fmt_speedup(
                                         s[f"geomean_{against}"], s[f"geomean_{against}_lo"],
                                         s[f"geomean_{against}_hi"], s[f"geomean_{against}_n"])})
    note = " ".join([
        COMMON_NOTE,
        "'correct % (incl. plain PyTorch)' counts every numerically correct result, plain PyTorch included; "
        "'correct custom kernel %' requires a custom kernel that was defined and launched, and the plain-PyTorch "
        "ones are counted in their own column. Cheats are never correct. "
        f"Correct means correct on the task's own shape and on {spec.shape_variants} shape variant(s) "
        "(evaluation.shape_variants: the task's size constants rescaled, docs/taxonomy.md); 'correct on the "
        "task's shape %' counts what a single-shape evaluation (KernelBench) counts as correct: every numerically "
        "correct result plus those wrong only on a variant (wrong_on_variant).",
        "fast_p: a correct custom kernel whose speedup interval lies entirely above p (so ties are not faster); "
        "faster / tie / slower count the correct custom kernels by that interval and the study's equivalence "
        "margin. The geometric mean is over correct custom kernels with a timing (n values).",
        "Against eager PyTorch, speedups are the evaluator's own interleaved measurement.",
        COMPILE_NOTE.format(modes=", ".join(spec.compile_modes) or "none"),
    ])
    return Table("headline", "Headline results per method", note, pd.DataFrame(rows), [
        Part("Correctness (n = cells with a final result)", pd.DataFrame(correctness)),
        Part("Speed against eager PyTorch (n = cells with a final result)", pd.DataFrame(speed["eager"])),
        Part("Speed against torch.compile, best mode per task (n = cells whose task has a compile baseline)",
             pd.DataFrame(speed[BEST_COMPILE])),
    ])


def by_level(cells: pd.DataFrame, spec: StudySpec) -> Table:
    rows, display = [], []
    for model, method, group in groups(cells, spec):
        line = _row_key(spec, model, method)
        for level in spec.levels:
            at = group[group["level"] == level]
            counted = with_result(at)
            s = {"cells_with_result": len(counted),
                 "cells_missing": int(at["status"].isin(aggregate.EXCLUDED_STATUSES).sum())}
            counts = {"compiled": int(flag(counted, "compiled").sum()), "correct": int(flag(counted, "correct").sum()),
                      "kernel_success": int(flag(counted, "kernel_success").sum()),
                      "plain_pytorch_correct": int(flag(counted, "plain_pytorch_correct").sum()),
                      "cheats": int((counted["category"] == "cheat").sum())}
            rows.append({"model": model, "method": method, "level": level, **s, **counts})
            line |= {f"L{level} cells": fmt_cells(s), f"L{level} custom kernel": counts["kernel_success"],
                     f"L{level} plain PyTorch": counts["plain_pytorch_correct"]}
        display.append(line)
    note = ("Counts of cells whose final result is a correct custom kernel, and separately of those that are "
            "correct plain PyTorch (no custom kernel launched), per KernelBench level. 'cells' is the denominator: "
            "cells with a final result (missing cells left out and counted in brackets).")
    return Table("levels", "Correct results per difficulty level", note, pd.DataFrame(rows),
                 [Part(None, pd.DataFrame(display))])


def _rate_delta(variant: pd.DataFrame, base: pd.DataFrame, against: str, indicator) -> tuple:
    v, b = aggregate.denominator(variant, against), aggregate.denominator(base, against)
    estimate = aggregate.rate(v, indicator(v))
    delta = aggregate.paired_difference(v, b, indicator)
    scale = lambda x: None if x is None else 100.0 * x  # noqa: E731
    return tuple(map(scale, (estimate.value, estimate.lo, estimate.hi, delta.value, delta.lo, delta.hi))) + (delta.n,)


def ablation(cells: pd.DataFrame, spec: StudySpec, summaries: Summaries | None = None) -> Table:
    summaries = summaries or Summaries(cells)
    ablations = spec.component_ablations()
    rows, display = [], []
    metrics_ = [("kernel_success", "correct custom kernel", "eager", lambda c: flag(c, "kernel_success")),
                ("fast_1_eager", "fast_1 vs eager", "eager", lambda c: aggregate.fast_p(c, 1.0, "eager")),
                ("fast_1_compile", "fast_1 vs torch.compile", BEST_COMPILE,
                 lambda c: aggregate.fast_p(c, 1.0, BEST_COMPILE))]
    for model in spec.models if ablations else []:
        in_model = cells[cells["model"] == model]
        base = in_model[in_model["method"] == spec.ablation_base]
        for method, change in [(spec.ablation_base, "full system")] + [(a.method, a.change) for a in ablations]:
            group = in_model[in_model["method"] == method]
            s = summaries(model, method)
            row = {"model": model, "method": method, "change": change,
                   "cells_with_result": s["cells_with_result"], "cells_missing": s["cells_missing"]}
            line = _row_key(spec, model, method) | {"change": change, "cells": fmt_cells(s)}
            for name, label, against, indicator in metrics_:
                value, lo, hi, d, dlo, dhi, paired = _rate_delta(group, base, against, indicator)
                row |= {f"{name}_pct": value, f"{name}_lo": lo, f"{name}_hi": hi, f"{name}_delta": d,
                        f"{name}_delta_lo": dlo, f"{name}_delta_hi": dhi, f"{name}_paired_tasks": paired}
                line |= {f"{label} %": fmt_pct(value, lo, hi),
                         f"delta {label} (pp)": "" if method == spec.ablation_base else fmt_delta(d, dlo, dhi)}
            row |= {k: s[k] for k in ("geomean_eager", "geomean_eager_lo", "geomean_eager_hi", "geomean_eager_n")}
            line["geomean vs eager"] = fmt_speedup(s["geomean_eager"], s["geomean_eager_lo"], s["geomean_eager_hi"],
                                                   s["geomean_eager_n"])
            rows.append(row)
            display.append(line)
    unclassified = spec.unclassified_variants()
    note = " ".join(filter(None, [
        f"Base (full system): '{spec.ablation_base}'. Each other row is an agentic method that differs from it in "
        "exactly one flag (or runs a single turn)." if spec.ablation_status() is None
        else f"No component ablation: {spec.ablation_status()}.",
        "Deltas are in percentage points against the full system, on the tasks where both have a final result, "
        "with a paired bootstrap interval over tasks.", COMMON_NOTE,
        ("Agentic methods left out (they differ from the base in more than one key): "
         + "; ".join(f"{m} ({', '.join(keys)})" for m, keys in unclassified.items()) + ".") if unclassified else "",
    ]))
    return Table("ablation", "Agentic component ablation", note, pd.DataFrame(rows),
                 [Part(None, pd.DataFrame(display), "no component ablation in this study")])


def best_of_n(cells: pd.DataFrame, spec: StudySpec, summaries: Summaries | None = None) -> Table:
    summaries = summaries or Summaries(cells)
    sweep = spec.best_of_n_sweep()
    rows, display = [], []
    for model in spec.models if sweep else []:
        for n, method in sweep:
            s = summaries(model, method)
            rows.append({"model": model, "n": n, "method": method, **s})
            display.append(({"model": spec.model_label(model)} if len(spec.models) > 1 else {}) | {
                "n": n, "method": method, "cells": fmt_cells(s),
                "correct custom kernel %": _pct(s, "kernel_success"),
                "fast_1 vs eager %": _pct(s, "fast_1_eager"),
                "fast_1 vs torch.compile %": _pct(s, "fast_1_compile"),
                "geomean vs eager": fmt_speedup(s["geomean_eager"], s["geomean_eager_lo"], s["geomean_eager_hi"],
                                                s["geomean_eager_n"]),
                "LLM calls / cell": "" if s["llm_calls_per_cell"] is None else f"{s['llm_calls_per_cell']:.1f}",
                "tokens / cell": "" if s["tokens_per_cell"] is None else f"{s['tokens_per_cell']:.0f}",
            })
    note = " ".join([
        f"Candidates per turn (n) for '{spec.ablation_base}' and the agentic methods that differ from it only in n."
        if sweep else "No best-of-n sweep in this study: "
        + (spec.ablation_status() or "no agentic method differs from the base only in n") + ".",
        COMMON_NOTE, "LLM calls and tokens include the agentic roles (analysis, brief, feedback)."])
    return Table("best_of_n", "Best-of-n scaling", note, pd.DataFrame(rows),
                 [Part(None, pd.DataFrame(display), "no best-of-n sweep in this study")])


def taxonomy(cells: pd.DataFrame, candidates: pd.DataFrame, spec: StudySpec) -> Table:
    columns = list(verdict.CATEGORIES) + list(FAILED_STATUSES)
    rows, final_view, every_view = [], [], []
    for model, method, group in groups(cells, spec):
        counted = with_result(group)
        counts = counted["category"].value_counts()
        final = {c: int(counts.get(c, 0)) for c in columns}
        rows.append({"scope": "final", "model": model, "method": method, **final, "total": len(counted),
                     "missing": int(group["status"].isin(aggregate.EXCLUDED_STATUSES).sum())})
        final_view.append(_row_key(spec, model, method) | final
                          | {"total": len(counted), "missing (excluded)": rows[-1]["missing"]})
        mine = candidates[(candidates["model"] == model) & (candidates["method"] == method)
                          & candidates["cell_status"].isin(["evaluated", *FAILED_STATUSES])]
        cand_counts = mine["category"].value_counts()
        every = {c: int(cand_counts.get(c, 0)) for c in verdict.CATEGORIES}
        failed_calls = int(cand_counts.get("generation_failed", 0))
        rows.append({"scope": "candidates", "model": model, "method": method, **every,
                     "generation_failed": failed_calls, "total": sum(every.values())})
        every_view.append(_row_key(spec, model, method) | every
                          | {"generation failed": failed_calls, "evaluated": sum(every.values())})
    note = ("Categories of the failure taxonomy in precedence order (kernelsweep.core.verdict). The first part counts "
            "each cell's final result (n = cells with a final result; 'no_candidate' and 'generation_failed' are "
            "cells that ended without an evaluated candidate); missing cells are counted separately and are in no "
            "other column. The second part counts every evaluated candidate of those cells (turns stopped by the "
            "stop rule are not candidates; failed model calls are shown apart).")
    return Table("taxonomy", "Failure taxonomy per method", note, pd.DataFrame(rows), [
        Part("Final result per cell", pd.DataFrame(final_view)),
        Part("Every evaluated candidate", pd.DataFrame(every_view)),
    ])


def _verdict_text(row: dict[str, Any]) -> str:
    status = row["status"]
    if status != "evaluated":
        return status
    text = str(row["category"])
    if row["category"] in verdict.NUMERICALLY_CORRECT and not _missing(row["speedup_eager"]):
        text += f" {row['speedup_eager']:.2f}x"
    share = row.get("kernel_share")
    if row["category"] in verdict.NUMERICALLY_CORRECT and isinstance(share, (int, float)) and not _missing(share):
        text += f" (kernel share {share:.2f})"
    return text


def per_task(cells: pd.DataFrame, spec: StudySpec) -> Table:
    data = cells[["task", "level", "model", "method", "sample", "status", "category", "speedup_eager",
                  "speedup_compile", "kernel_share", "task_degenerate"]].copy()
    display = []
    records = cells.to_dict("records")
    degenerate = {r["task"] for r in records if not _missing(r.get("task_degenerate")) and bool(r["task_degenerate"])}
    for task in spec.tasks:
        line = {"task": task.id, "level": task.level, "name": task.name,
                "degenerate": "yes" if task.id in degenerate else ""}
        for model in spec.models:
            for method in spec.methods:
                mine = [r for r in records if r["task"] == task.id and r["model"] == model and r["method"] == method]
                label = f"{spec.model_label(model)}/{method}" if len(spec.models) > 1 else method
                line[label] = "; ".join(_verdict_text(r) for r in sorted(mine, key=lambda r: r["sample"]))
        display.append(line)
    note = ("The final verdict of every method on every task (one entry per sample, separated by ';'): the "
            "category of the final candidate, with its speedup over eager PyTorch for numerically correct ones "
            "and the share of the forward's time its own kernel code accounts for where it was measured "
            "(no_custom_kernel is plain PyTorch, or a kernel under a tenth of the work: never a kernel success). 'missing' marks a cell without "
            "final.json; 'no_candidate' / 'generation_failed' a cell that ended without an evaluated candidate. "
            "'degenerate' marks a task whose outputs, at its default init, did not depend on its inputs when it was "
            "validated: no candidate can be told from a constant there, and a matching one is indistinguishable.")
    return Table("per_task", "Final verdict per task", note, data, [Part(None, pd.DataFrame(display))])


def build_tables(cells: pd.DataFrame, candidates: pd.DataFrame, spec: StudySpec) -> list[Table]:
    summaries = Summaries(cells)
    return [headline(cells, spec, summaries), by_level(cells, spec), ablation(cells, spec, summaries),
            best_of_n(cells, spec, summaries),
            taxonomy(cells, candidates, spec), per_task(cells, spec)]


def by_precision(tables: dict[str, list[Table]]) -> list[Table]:
    """One table per name from each precision's tables (a study of several precisions):
    a part per precision and part, and the numbers with a `precision` column first."""
    merged: dict[str, Table] = {}
    for precision, found in tables.items():
        for table in found:
            into = merged.setdefault(table.name, Table(table.name, table.title, table.note, pd.DataFrame()))
            into.data = pd.concat([into.data, table.data.assign(precision=precision)[
                ["precision", *table.data.columns]]], ignore_index=True)
            into.parts += [Part(f"{precision}: {part.title}" if part.title else precision, part.frame, part.empty_note)
                           for part in table.parts]
    return list(merged.values())


# --- writing ----------------------------------------------------------------

def to_markdown(table: Table, heading: str = "#") -> str:
    lines = [f"{heading} {table.title}", "", table.note, ""]
    for part in table.parts:
        if part.title:
            lines += [f"{heading}# {part.title}", ""]
        if part.frame.empty:
            lines += [f"_{part.empty_note}_", ""]
        else:
            lines += [tabulate(part.frame, headers="keys", tablefmt="github", showindex=False,
                               disable_numparse=True), ""]
    return "\n".join(lines)


def to_html(table: Table) -> str:
    body = [f"<h1>{html.escape(table.title)}</h1>", f"<p>{html.escape(table.note)}</p>"]
    for part in table.parts:
        if part.title:
            body.append(f"<h2>{html.escape(part.title)}</h2>")
        if part.frame.empty:
            body.append(f"<p><em>{html.escape(part.empty_note)}</em></p>")
        else:
            body.append(tabulate(part.frame, headers="keys", tablefmt="html", showindex=False, disable_numparse=True))
    style = "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(table.title)}</title>"
            f"<style>{style}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_table(table: Table, folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{table.name}.{ext}" for ext in ("md", "html", "csv")]
    write_atomic(paths[0], to_markdown(table) + "\n")
    write_atomic(paths[1], to_html(table))
    write_atomic(paths[2], table.data.to_csv(index=False))
    return paths
