"""Results from before precision was a path part: found, and moved only on
request to where the run layout puts them (kernelsweep.study.relayout)."""

import json
import os

import pytest

from kernelsweep.study import layout, relayout
from kernelsweep.commands.cli import main as cli


def old_results(root, precision="fp32"):
    """runs/{model}/…, profile/{device}/{task}.json, baseline/{device}/{task}.json, as written before."""
    cand = root / "runs/m/zero_shot/L1-001/s0/t0/c0"
    cand.mkdir(parents=True)
    (cand / layout.EVAL).write_text(json.dumps({"category": "correct_tie", "precision": precision}))
    (root / "runs/m/zero_shot/L1-001/s0" / layout.FINAL).write_text("{}")
    for stage in ("profile", "baseline"):
        (root / stage / "cpu").mkdir(parents=True)
        (root / stage / "cpu" / "L1-001.json").write_text(json.dumps({"precision": precision}))
    os.utime(cand / layout.EVAL, (1_000_000, 1_000_000))
    return root


def test_old_layout_is_found_and_the_workflow_would_say_so(tmp_path):
    results = old_results(tmp_path / "results")
    found = {p.relative_to(results).as_posix() for p in relayout.legacy_paths(results)}
    assert found == {"runs/m", "profile/cpu/L1-001.json", "baseline/cpu/L1-001.json"}
    note = relayout.legacy_note(results)
    assert "kernelsweep relayout --results" in note and "recomputed" in note


def test_relayout_moves_to_the_recorded_precision_keeping_mtimes(tmp_path, capsys):
    results = old_results(tmp_path / "results", "bf16")
    assert cli(["relayout", "--results", str(results), "--dry-run"]) == 0
    assert (results / "runs/m").is_dir()  # a dry run moves nothing
    assert cli(["relayout", "--results", str(results)]) == 0
    key = dict(precision="bf16", model="m", method="zero_shot", task="L1-001", sample=0, turn=0, cand=0)
    moved = results / layout.CAND.format(**key) / layout.EVAL
    assert moved.is_file() and moved.stat().st_mtime == 1_000_000
    assert (results / layout.BASELINE.format(device="cpu", precision="bf16", task="L1-001")).is_file()
    assert (results / layout.PROFILE.format(device="cpu", precision="bf16", task="L1-001")).is_file()
    assert relayout.legacy_paths(results) == []


def test_relayout_refuses_when_the_precision_is_unknown_or_contradicted(tmp_path):
    results = tmp_path / "results"
    (results / "runs/m/zero_shot/L1-001/s0").mkdir(parents=True)  # no record names a precision
    with pytest.raises(ValueError, match="pass --precision"):
        relayout.moves(results)
    assert [dst for _, dst in relayout.moves(results, "fp16")] == [results / "runs/fp16/m"]
    other = old_results(tmp_path / "other", "fp32")
    with pytest.raises(ValueError, match="records in .* name fp32"):
        relayout.moves(other, "bf16")


def test_relayout_of_results_already_in_the_current_layout_moves_nothing(tmp_path, capsys):
    results = old_results(tmp_path / "results", "fp16")
    assert cli(["relayout", "--results", str(results)]) == 0
    before = sorted(p.relative_to(results) for p in results.rglob("*"))
    capsys.readouterr()
    assert cli(["relayout", "--results", str(results)]) == 0  # a second time, as a resumed run does
    assert "0 path(s) moved" in capsys.readouterr().out
    assert sorted(p.relative_to(results) for p in results.rglob("*")) == before
