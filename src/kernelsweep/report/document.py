"""REPORT.md: the study's configuration, hardware and software, every table and
figure, and — by name — every cell that is missing or failed and every problem
found in the raw files."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pandas as pd
import yaml
from tabulate import tabulate

from kernelsweep import metrics
from kernelsweep.report.collect import FAILED_STATUSES, Collection
from kernelsweep.report.figures import FIGURES
from kernelsweep.report.tables import Table, to_markdown

TITLE = "kernelsweep report"


def _md_table(rows: list[dict[str, Any]]) -> str:
    return tabulate(pd.DataFrame(rows), headers="keys", tablefmt="github", showindex=False, disable_numparse=True)


def _study_section(c: Collection, results: str) -> list[str]:
    spec, cells = c.spec, c.cells
    status = Counter(cells["status"])
    with_result = int(cells["has_result"].fillna(False).sum())
    levels = Counter(t.level for t in spec.tasks)
    lines = [
        "## Study", "",
        f"- Target device: `{spec.device}`, precision `{spec.precision}`.",
        f"- Tasks: {len(spec.tasks)} ({', '.join(f'level {lv}: {n}' for lv, n in sorted(levels.items()))}); "
        f"samples per cell: {spec.samples}; task size scale: {spec.task_scale:g} (`tasks.scale`: every task's size "
        f"constants times this, docs/taxonomy.md); shape variants per evaluation: {spec.shape_variants} "
        "(`evaluation.shape_variants`).",
        f"- Expected cells (models x methods x tasks x samples): {len(spec.models)} x {len(spec.methods)} x "
        f"{len(spec.tasks)} x {spec.samples} = {len(cells)}.",
        f"- Cells with a final result: {with_result} ({status.get('evaluated', 0)} evaluated, "
        + ", ".join(f"{status.get(s, 0)} {s}" for s in FAILED_STATUSES) + "); "
        f"missing: {status.get('missing', 0)}; unreadable: {status.get('unreadable', 0)} "
        "(missing and unreadable cells are in no denominator; all are listed below).",
        f"- Raw results: `{results}`.", "",
        "Models:", "",
        _md_table([{"model": name, "backend": m.get("backend", ""), "model id": m.get("model") or m.get("path") or ""}
                   for name, m in spec.models.items()]), "",
        "Methods:", "",
        _md_table(_method_rows(spec.methods)), "",
    ]
    return lines


def _method_rows(methods: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    keys = list(dict.fromkeys(k for m in methods.values() for k in m))
    return [{"method": name} | {k: _plain(m.get(k)) for k in keys} for name, m in methods.items()]


def _plain(value: Any) -> str:
    return "" if value is None else str(value)


DEFINITIONS = """## How to read the numbers

- Per-cell numbers use the cell's final (best) candidate; per-candidate tables (`candidates.parquet`, the second
  taxonomy table) use every evaluated candidate.
- *compiled*: the candidate was built and loaded. *correct*: numerically correct on every trial, on the task's own
  shape and on {variants} shape variant(s) (`evaluation.shape_variants`: the task's size constants rescaled to odd
  sizes; never true for a cheat). *correct on the task's shape*: what a single-shape evaluation (KernelBench) counts
  as correct, i.e. also the candidates wrong only on a variant (`wrong_on_variant`). *correct custom kernel*: correct **and** a custom kernel was defined and launched; a correct candidate
  without a launched kernel is plain PyTorch and is counted separately, never as a kernel success.
- *speedup* = median reference time / median candidate time, with a bootstrap 95% interval over the timing samples
  (`kernelsweep.metrics`). *faster* / *slower* need the whole interval above 1 + m / below 1/(1 + m), where
  m = {margin:g} is the study's equivalence margin (`evaluation.equivalence_margin`: reruns move a speedup by more
  than its interval); otherwise it is a *tie*. *fast_p*: a correct custom kernel whose interval lies above p.
- Against eager PyTorch the speedup is the evaluator's own measurement (reference and candidate interleaved in one
  process). Against torch.compile (the fastest compile mode of each task, timed by the baseline stage in other
  processes) it is (eager / candidate, in the evaluator) / (eager / compile mode, in the baseline stage): going
  through eager PyTorch, timed in both, cancels the drift of absolute times between processes (see the drift
  check below), with a bootstrap interval over all four sets of samples.
- Intervals on rates and geometric means are 95% percentile bootstraps over tasks.
"""


def _figures_section() -> list[str]:
    lines = ["## Figures", ""]
    for name, caption in FIGURES.items():
        lines += [f"### {caption}", "", f"![{caption}](figures/{name}.png)", "",
                  f"([SVG](figures/{name}.svg))", ""]
    return lines


def _cell_id(row: dict[str, Any]) -> str:
    return f"{row['model']}/{row['method']}/{row['task']}/s{row['sample']}"


def _cells_section(c: Collection) -> list[str]:
    lines = ["## Missing and failed cells", ""]
    rows = c.cells.to_dict("records")
    missing = [r for r in rows if r["status"] in ("missing", "unreadable")]
    failed = [r for r in rows if r["status"] in FAILED_STATUSES]
    lines += [f"Missing (left out of every denominator): {len(missing)}.", ""]
    lines += [f"- `{_cell_id(r)}`: " + ("no final.json" if r["status"] == "missing" else "final.json unreadable or "
                                        "inconsistent (see data checks)") for r in missing]
    lines += ["", f"Failed without an evaluated candidate (counted as not successful): {len(failed)}.", ""]
    lines += [f"- `{_cell_id(r)}`: {r['status']}" for r in failed]
    return lines + [""]


def _checks_section(c: Collection) -> list[str]:
    lines = ["## Data checks", ""]
    if not c.problems and not c.unexpected_runs:
        return lines + ["No problem found in the raw files.", ""]
    for p in c.problems:
        lines.append(f"- **{p.effect}** `{p.path}`: {p.message}")
    for run in c.unexpected_runs:
        lines.append(f"- **ignored** `runs/{run}`: not a model/method of this study")
    return lines + [""]


def _environment_section(c: Collection) -> list[str]:
    lines = ["## Hardware and software", "", "From the provenance of every evaluation:", ""]
    if c.environments:
        lines.append(_md_table([{k: _plain(v) for k, v in env.items()} for env in c.environments]))
        if len({env["device_name"] for env in c.environments}) > 1:
            lines += ["", "**Warning:** evaluations ran on more than one kind of device; speedups from different "
                      "devices are not comparable."]
    else:
        lines.append("_no evaluation found_")
    lines += ["", "torch.compile baselines (`baseline/{device}/{task}.json`):", ""]
    rows = []
    for task in c.spec.tasks:
        baseline = c.baselines.get(task.id)
        if baseline is None:
            rows.append({"task": task.id, "device": "", "usable modes": "", "unusable": "no baseline file"})
            continue
        rows.append({"task": task.id, "device": _plain(baseline.device_name),
                     "usable modes": ", ".join(baseline.samples),
                     "unusable": "; ".join(f"{m}: {why}" for m, why in baseline.unusable.items())})
    lines.append(_md_table(rows) if rows else "_no task_")
    return lines + [""]


def _drift_section(c: Collection) -> list[str]:
    """Eager PyTorch timed twice, in the evaluator and in the baseline stage: their
    ratio shows how far the separate-process compile comparisons can drift."""
    lines = ["## Cross-process drift check", "",
             "The reference (eager PyTorch) is timed by the evaluator and again by the baseline stage. The ratio is "
             "how far absolute times drifted between those processes; the torch.compile comparisons go through "
             "eager PyTorch to cancel it, so a ratio far from 1 means comparing absolute times would have been "
             "wrong by that much.", ""]
    evaluated = c.candidates[c.candidates["ref_runtime_ms"].notna()]
    rows = []
    for task in c.spec.tasks:
        baseline = c.baselines.get(task.id)
        ref = evaluated.loc[evaluated["task"] == task.id, "ref_runtime_ms"]
        if baseline is None or "eager" not in baseline.samples or ref.empty:
            continue
        eager = metrics.summarize(baseline.samples["eager"])["median"]
        evaluator = metrics.summarize(ref.tolist())["median"]
        rows.append({"task": task.id, "evaluator eager median (ms)": f"{evaluator:.4g}",
                     "baseline eager median (ms)": f"{eager:.4g}",
                     "baseline / evaluator": f"{eager / evaluator:.3f}" if evaluator else "n/a"})
    lines.append(_md_table(rows) if rows else "_no task has both measurements_")
    return lines + [""]


def _config_section(c: Collection) -> list[str]:
    if not c.spec.config:
        return ["## Configuration", "", "_the study file carries no configuration_", ""]
    dumped = yaml.safe_dump(c.spec.config, sort_keys=False, default_flow_style=False, allow_unicode=True)
    return ["## Configuration", "", "The resolved configuration of the study:", "",
            "```yaml", dumped.rstrip(), "```", ""]


def _files_section() -> list[str]:
    return ["## Files", "",
            "- `cells.parquet` / `cells.csv`: one row per expected cell (final result, speedups against every "
            "baseline, LLM calls, tokens, wall times).",
            "- `candidates.parquet` / `candidates.csv`: one row per candidate.",
            "- `tables/*.md|html|csv`: the tables above (CSV holds the unformatted numbers).",
            "- `figures/*.png|svg`: the figures above.", ""]


def render(c: Collection, tables: list[Table], results: str) -> str:
    lines = [f"# {TITLE}", "",
             "Generated by `kernelsweep report` from the raw result files alone; rerun it rather than editing this "
             "file. Every denominator is stated next to its numbers.", ""]
    lines += _study_section(c, results)
    lines += DEFINITIONS.format(margin=c.spec.equivalence_margin, variants=c.spec.shape_variants).splitlines() + [""]
    for table in tables:
        lines += [to_markdown(table, heading="##"), ""]
    lines += _figures_section()
    lines += _cells_section(c)
    lines += _checks_section(c)
    lines += _environment_section(c)
    lines += _drift_section(c)
    lines += _files_section()
    lines += _config_section(c)
    return "\n".join(lines).rstrip() + "\n"
