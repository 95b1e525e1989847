"""The baselines' own tables: each mode's speedup over eager PyTorch per task, and the
candidates against each mode per method, every ratio with its 95% interval and the
faster / tie / slower verdict read from that interval (kernelsweep.core.metrics)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from kernelsweep.report import aggregate
from kernelsweep.report.baselines import column_prefix
from kernelsweep.report.collect import Collection
from kernelsweep.report.tables import NA, Part, Table, fmt_speedup


def mode_rows(collection: Collection) -> list[dict[str, Any]]:
    """Per task and mode but eager: eager / mode with its interval, or why there is none."""
    spec, rows = collection.spec, []
    for task in spec.tasks:
        baseline = collection.baselines.get(task.id)
        for mode in spec.other_modes:
            row = {"task": task.id, "mode": mode, "speedup": None, "speedup_lo": None, "speedup_hi": None,
                   "verdict": None, "paired": None, "unusable": None}
            ratio = baseline.ratio(mode, spec.equivalence_margin) if baseline else None
            if ratio is None:
                row["unusable"] = "no baseline record" if baseline is None else \
                    baseline.unusable.get(mode) or "no eager timing to go through"
            else:
                lo, hi = ratio["speedup_ci"] or (None, None)
                row |= {"speedup": ratio["speedup"], "speedup_lo": lo, "speedup_hi": hi,
                        "verdict": ratio["verdict"], "paired": mode in baseline.paired}
            rows.append(row)
    return rows


def comparison_rows(collection: Collection) -> list[dict[str, Any]]:
    """Per model, method and mode: the correct custom kernels' verdicts and geometric-mean
    speedup against that mode, over the cells whose task has it measured."""
    spec, cells, rows = collection.spec, collection.cells, []
    for model, method, group in aggregate.groups(cells, spec):
        counted = aggregate.with_result(group)
        for mode in spec.other_modes:
            tasks = [t for t, b in collection.baselines.items() if b.comparable(mode)]
            base = counted[counted["task"].isin(tasks)]
            prefix = column_prefix(mode)
            estimate = aggregate.geomean_speedup(base, prefix)
            rows.append({"model": model, "method": method, "mode": mode, "cells": len(base),
                         **aggregate.verdict_counts(base, prefix), "geomean": estimate.value,
                         "geomean_lo": estimate.lo, "geomean_hi": estimate.hi, "geomean_n": estimate.n})
    return rows


def tables(collection: Collection) -> list[Table]:
    """[] for a study without other baseline modes or without a baseline record."""
    spec = collection.spec
    if not spec.other_modes or not collection.baselines:
        return []
    margin = spec.equivalence_margin
    modes = pd.DataFrame(mode_rows(collection))
    view = [{"task": r["task"], "mode": r["mode"],
             "eager / mode [95% interval]": fmt_speedup(r["speedup"], r["speedup_lo"], r["speedup_hi"]),
             "verdict": r["verdict"] or NA,
             "timed beside eager": NA if r["paired"] is None else ("yes" if r["paired"] else "no, in another process"),
             "why none": r["unusable"] or ""} for r in modes.to_dict("records")]
    modes_note = (f"Each baseline mode's speedup over eager PyTorch (eager time / mode time), with the 95% bootstrap "
                  f"interval over its timing samples; faster / slower need the whole interval above 1 + m / below "
                  f"1 / (1 + m), m = {margin:g}, else tie. 'timed beside eager': the mode's worker timed it "
                  f"interleaved with eager on the same inputs, so the ratio carries no drift between processes; "
                  f"cudnn-benchmark cannot be (cuDNN's algorithm cache is process-wide), nor can a record from "
                  f"before pairing, and those go through the eager mode's own worker.")
    compared = pd.DataFrame(comparison_rows(collection))
    compared_view = [{"model": spec.model_label(r["model"]), "method": r["method"], "against": r["mode"],
                      "cells": r["cells"],
                      "faster / tie / slower": f"{r['faster']} / {r['tie']} / {r['slower']}"
                      + (f" (+{r['untimed']} untimed)" if r["untimed"] else ""),
                      "geomean speedup": fmt_speedup(r["geomean"], r["geomean_lo"], r["geomean_hi"], r["geomean_n"])}
                     for r in compared.to_dict("records")]
    compared_note = (f"The correct custom kernels against each baseline mode: (eager / candidate, in the evaluator) / "
                     f"(eager / mode, in the baseline stage), with a bootstrap interval over the four sets of samples; "
                     f"faster / tie / slower from that interval and m = {margin:g}, so a run-to-run wobble of the "
                     f"baseline lands as a tie, not a flip. 'cells': cells with a final result whose task has the "
                     f"mode measured; the geometric mean's interval resamples tasks.")
    return [Table("baselines", "Baselines: each mode against eager PyTorch", modes_note, modes,
                  [Part(None, pd.DataFrame(view), "no baseline mode besides eager")]),
            Table("baseline_comparisons", "Candidates against each baseline mode", compared_note, compared,
                  [Part(None, pd.DataFrame(compared_view))])]
