"""A study of two precisions: the report reads each precision's cells and
baselines from their own folders and breaks every table down by precision;
a study of one precision gets the report it always had."""

import pandas as pd
from synthetic import ResultsWriter, constant

from kernelsweep.core import metrics
from kernelsweep.report.build import build_report
from kernelsweep.report.figures import FIGURES
from kernelsweep.report.spec import parse_study

STUDY = {
    "device": "cpu", "precisions": ["fp32", "bf16"],
    "models": {"m1": {"backend": "openai", "model": "synthetic/model"}},
    "methods": {"zero_shot": {"strategy": "zero_shot", "turns": 1, "n": 1}},
    "tasks": [{"id": "L1-001", "level": 1, "name": "a"}, {"id": "L1-002", "level": 1, "name": "b"}],
    "samples": 1, "baseline_modes": ["eager", "inductor-default"],
    "config": {"evaluation": {"equivalence_margin": metrics.EQUIVALENCE_MARGIN}},
}


def write(root, precision, outcomes):
    """One zero_shot cell per task at `precision`, with the given categories, and its baselines."""
    w = ResultsWriter(root, precision=precision)
    for task, category in outcomes.items():
        w.task(task, 1, task)
        w.baseline(task, {"eager": constant(2.0), "inductor-default": constant(1.0)})
        timed = (constant(2.0), constant(1.0)) if category == "correct_faster" else (None, None)
        record = w.candidate("m1", "zero_shot", task, 0, 0, 0, category, *timed)
        w.final("m1", "zero_shot", task, 1, 0, best=(0, 0), result=record, candidates_evaluated=1, llm_calls=1)


def test_every_table_is_broken_down_by_precision(tmp_path):
    results = tmp_path / "results"
    write(results, "fp32", {"L1-001": "correct_faster", "L1-002": "correct_faster"})
    write(results, "bf16", {"L1-001": "correct_faster", "L1-002": "shape_mismatch"})  # e.g. fp32 returned
    out = build_report(results, results / "report", parse_study(STUDY))
    cells = out.collection.cells
    assert sorted(zip(cells["precision"], cells["task"], cells["category"])) == [
        ("bf16", "L1-001", "correct_faster"), ("bf16", "L1-002", "shape_mismatch"),
        ("fp32", "L1-001", "correct_faster"), ("fp32", "L1-002", "correct_faster")]
    assert not out.collection.problems, out.collection.problems

    headline = pd.read_csv(results / "report/tables/headline.csv")
    assert headline.columns[0] == "precision"
    success = dict(zip(headline["precision"], headline["kernel_success_pct"]))
    assert success == {"fp32": 100.0, "bf16": 50.0}
    # each precision against its own compile baseline
    assert dict(zip(headline["precision"], headline["cells_compile"])) == {"fp32": 2, "bf16": 2}
    report = (results / "report/REPORT.md").read_text()
    for table in ("headline", "levels", "taxonomy", "per_task"):
        text = (results / f"report/tables/{table}.md").read_text()
        assert "fp32" in text and "bf16" in text, table
    assert "### fp32: Correctness" in report and "### bf16: Correctness" in report
    assert "precision `fp32`, `bf16`" in report
    assert "## Hardware and software (bf16)" in report
    for name in FIGURES:
        for precision in ("fp32", "bf16"):
            assert (results / f"report/figures/{name}-{precision}.svg").is_file()


def test_one_precision_reports_as_before(tmp_path):
    results = tmp_path / "results"
    write(results, "bf16", {"L1-001": "correct_faster", "L1-002": "shape_mismatch"})
    write(results, "fp32", {"L1-001": "correct_faster"})  # another precision's folder: not this study's
    build_report(results, results / "report", parse_study({**STUDY, "precisions": ["bf16"]}))
    headline = pd.read_csv(results / "report/tables/headline.csv")
    assert "precision" not in headline.columns and list(headline["kernel_success_pct"]) == [50.0]
    report = (results / "report/REPORT.md").read_text()
    assert "precision `bf16`." in report and "### Correctness" in report and "bf16: Correctness" not in report
    assert "`runs/fp32`: not a model/method of this study" in report
    assert all((results / f"report/figures/{name}.svg").is_file() for name in FIGURES)
