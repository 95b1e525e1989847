"""One call from raw results to every report file. Nothing is cached between runs:
deleting the output folder and running again gives the same files."""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from kernelsweep.core.fileio import write_atomic
from kernelsweep.study.layout import figure_stem
from kernelsweep.report import document
from kernelsweep.report.claims import figure as claims_figure
from kernelsweep.report.collect import Collection, collect
from kernelsweep.report.figures import build_figures, save_figure
from kernelsweep.report.spec import ReportInputError, StudySpec
from kernelsweep.report.tables import Table, build_tables, by_precision, write_table


@dataclass
class ReportResult:
    collection: Collection
    files: list[Path]


def _write_frame(frame: pd.DataFrame, folder: Path, name: str) -> list[Path]:
    parquet, csv = folder / f"{name}.parquet", folder / f"{name}.csv"
    buffer = io.BytesIO()
    frame.to_parquet(buffer, engine="pyarrow", index=False)
    write_atomic(parquet, buffer.getvalue())
    write_atomic(csv, frame.to_csv(index=False))
    return [parquet, csv]


def extra_tables(results: Path, collection: Collection) -> list[Table]:
    """Sections that only some studies have: the baselines (a study with baseline records),
    published vs re-measured (a replayed study whose records carry its own verdicts),
    published claims (a study of a corpus) and speed of light (a study with profiles)."""
    from kernelsweep.report import baseline_tables, claims, published, speedoflight

    found = (baseline_tables.tables(collection) + published.tables(collection, published.load(collection))
             + claims.tables(results, collection))
    if any(speedoflight.bounds(results, collection).get(t.id, {}).get("reason") != "no profile file"
           for t in collection.spec.tasks):
        found.append(speedoflight.table(results, collection))
    return found


def build_report(results: str | Path, out: str | Path, spec: StudySpec, jobs: int = 1) -> ReportResult:
    """Every report file under `out` from the raw files under `results`; `jobs`
    processes share the torch.compile comparisons. A study of several precisions
    gets every table broken down by precision and each figure once per precision."""
    results, out = Path(results), Path(out)
    if not results.is_dir():
        raise ReportInputError(f"results folder not found: {results}")
    collection = collect(results, spec, jobs)
    files = _write_frame(collection.candidates, out, "candidates") + _write_frame(collection.cells, out, "cells")
    checks = pd.DataFrame([vars(p) for p in collection.problems], columns=["effect", "path", "message"])
    write_atomic(out / document.DATA_CHECKS, checks.to_csv(index=False))
    files.append(out / document.DATA_CHECKS)
    several = len(spec.precisions) > 1
    per_precision = {}
    for part in collection.by_precision():
        tables = build_tables(part.cells, part.candidates, part.spec) + extra_tables(results, part)
        per_precision[part.spec.precision] = tables
        data = {table.name: table.data for table in tables}
        drawings = build_figures(data, part.cells, part.candidates, part.spec)
        if "claims_rows" in data:  # a study of a corpus (report.claims)
            drawings["claims"] = lambda frame=data["claims_rows"]: claims_figure(frame)
        for name, draw in drawings.items():
            files += save_figure(draw(), out / "figures", figure_stem(name, part.spec.precision if several else None))
    tables = by_precision(per_precision) if several else next(iter(per_precision.values()))
    for table in tables:
        files += write_table(table, out / "tables")
    report = out / "REPORT.md"
    text = document.render(collection, tables, str(results))
    # The react strategy's own analysis (trajectories, guards, tools), from its traces.
    from kernelsweep.report import react as react_analysis

    react = react_analysis.build(results, out, list(spec.models), spec.methods, [t.id for t in spec.tasks], spec.samples,
                           list(spec.precisions))
    write_atomic(report, text + ("\n" + react if react else ""))
    return ReportResult(collection, files + [report])
