"""`kernelsweep report` as a user runs it (a real subprocess): every output is
rebuilt from the raw files alone, identically, and bad inputs get one clear line."""

import json
import shutil
import subprocess
import sys

import pandas as pd

from kernelsweep.report.figures import FIGURES

TABLES = ("headline", "levels", "ablation", "best_of_n", "taxonomy", "per_task")
EXTRA_TABLES = ("baselines", "baseline_comparisons")  # a study with baseline records (report.baseline_tables)


def run_report(*args):
    return subprocess.run([sys.executable, "-m", "kernelsweep", "report", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def snapshot(folder):
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_report_rebuilds_identically_from_raw_files_alone(small_study):
    results, study, _ = small_study
    done = run_report("--results", results, "--study", study)
    assert done.returncode == 0, done.stderr
    assert "11 of 12 cells with a final result (1 missing, 0 unreadable)" in done.stdout
    out = results / "report"
    first = snapshot(out)
    expected = ({"REPORT.md", "data_checks.csv"} | {f"{n}.{e}" for n in ("cells", "candidates") for e in ("parquet", "csv")}
                | {f"tables/{t}.{e}" for t in TABLES + EXTRA_TABLES for e in ("md", "html", "csv")}
                | {f"figures/{f}.{e}" for f in FIGURES for e in ("png", "svg")})
    assert set(first) == expected

    shutil.rmtree(out)  # every derived file gone
    again = run_report("--results", results, "--study", study)
    assert again.returncode == 0, again.stderr
    second = snapshot(out)
    assert set(second) == set(first)
    changed = [name for name in first if first[name] != second[name]]
    assert changed == []


def test_report_document_lists_missing_and_failed_cells_and_the_environment(small_study):
    results, study, _ = small_study
    out = results.parent / "elsewhere"
    assert run_report("--results", results, "--study", study, "--out", out).returncode == 0
    text = (out / "REPORT.md").read_text()
    assert "- `m1/zero_shot/L2-001/s0`: no final.json" in text
    assert "- `m1/agentic_no_rag/L1-002/s0`: no_candidate" in text
    assert "| Synthetic Device 1 | 555.42 | 2.13.0 | 13.0 | 3.11.9 |" in text.replace("   ", " ").replace("  ", " ")
    assert "inductor-max-autotune: failed: autotune failed" in text
    assert "## Baselines: each mode against eager PyTorch" in text and "1.33x [1.33, 1.33]" in text
    assert "cancels the drift of absolute times between processes" in text
    assert "```yaml\ndevice: cpu" in text
    for table in TABLES:
        assert (out / "tables" / f"{table}.md").read_text().splitlines()[0].startswith("# ")
    for figure in FIGURES:
        assert f"figures/{figure}.png" in text


def test_tidy_tables_round_trip_through_parquet(small_study):
    results, study, _ = small_study
    assert run_report("--results", results, "--study", study).returncode == 0
    cells = pd.read_parquet(results / "report" / "cells.parquet")
    assert len(cells) == 12 and cells["kernel_success"].dtype == "boolean"
    row = cells[(cells["method"] == "agentic") & (cells["task"] == "L1-001")].iloc[0]
    assert row["llm_calls"] == 7 and row["speedup_eager"] == 2.0 and row["category"] == "correct_faster"
    candidates = pd.read_csv(results / "report" / "candidates.csv")
    assert len(candidates) == 17 and set(candidates["category"]) >= {"cheat", "stopped", "no_custom_kernel"}


def test_strict_fails_on_data_problems(small_study):
    results, study, _ = small_study
    assert run_report("--results", results, "--study", study, "--strict").returncode == 0
    (results / "runs/fp32/m1/agentic/L2-001/s0/final.json").write_text("{ truncated")
    lenient = run_report("--results", results, "--study", study)
    assert lenient.returncode == 0 and "1 data problems (1 left files out)" in lenient.stderr
    assert run_report("--results", results, "--study", study, "--strict").returncode == 1
    assert "unreadable" in (results / "report" / "REPORT.md").read_text()


def test_bad_inputs_get_one_clear_line(tmp_path, small_study):
    results, study, _ = small_study
    cases = [
        (["--results", results, "--study", tmp_path / "absent.json"], "study file not found"),
        (["--results", tmp_path / "nowhere", "--study", study], "results folder not found"),
    ]
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"device": "cpu", "models": {}, "methods": {}, "tasks": []}))
    cases.append((["--results", results, "--study", broken], "'models' is empty"))
    for args, message in cases:
        done = run_report(*args)
        assert done.returncode == 2, done.stderr
        assert message in done.stderr and "Traceback" not in done.stderr
        assert done.stderr.startswith("kernelsweep report: error: ")
    usage = run_report("--results", results)
    assert usage.returncode == 2 and "--study" in usage.stderr and "Traceback" not in usage.stderr
