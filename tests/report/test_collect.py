"""The tidy tables read from raw files: every expected cell, every candidate, the
numbers copied or compared correctly, and every problem in the files reported."""

import json

import pandas as pd
import pytest
from synthetic import ResultsWriter, constant, wobbly

from kernelsweep.report.baselines import Baseline, Comparator
from kernelsweep.report.collect import collect


def cell(cells, method, task):
    rows = cells[(cells["method"] == method) & (cells["task"] == task)]
    assert len(rows) == 1
    return rows.iloc[0]


def test_every_expected_cell_has_one_row_and_the_missing_one_is_marked(small_study):
    results, _, spec = small_study
    c = collect(results, spec)
    assert len(c.cells) == 4 * 3
    assert c.cells["status"].value_counts().to_dict() == {"evaluated": 10, "no_candidate": 1, "missing": 1}
    missing = cell(c.cells, "zero_shot", "L2-001")
    assert missing["status"] == "missing" and not missing["has_result"]
    # the fast kernel on disk of the missing cell is not a result of anything
    assert pd.isna(missing["kernel_success"]) and pd.isna(missing["speedup_eager"])
    assert c.problems == [] and c.unexpected_runs == []


def test_final_results_and_their_speedups(small_study):
    results, _, spec = small_study
    cells = collect(results, spec).cells
    best = cell(cells, "agentic", "L1-001")
    assert (best["best_turn"], best["best_candidate"], best["category"]) == (1, 0, "correct_faster")
    assert best["kernel_success"] and best["correct"] and best["custom_kernel"]
    assert best["speedup_eager"] == pytest.approx(2.0) and best["verdict_eager"] == "faster"
    # torch.compile: the fastest usable mode of L1-001 is reduce-overhead (1.0 ms; max-autotune failed)
    assert best["best_compile_mode"] == "inductor-reduce-overhead"
    assert best["speedup_compile"] == pytest.approx(1.0) and best["verdict_compile"] == "tie"
    assert not best["faster_compile"]
    assert best["speedup_inductor_default"] == pytest.approx(1.5) and best["verdict_inductor_default"] == "faster"
    assert pd.isna(best["speedup_inductor_max_autotune"])
    # L2-001: max-autotune (0.8 ms) is the fastest mode; the 2.0 ms kernel is 0.4x of it
    slow = cell(cells, "agentic", "L2-001")
    assert slow["best_compile_mode"] == "inductor-max-autotune"
    assert slow["speedup_compile"] == pytest.approx(0.8 / 6.0) and slow["verdict_compile"] == "slower"
    assert slow["speedup_eager"] == pytest.approx(0.5) and slow["category"] == "correct_slower"
    # L1-002 has no baseline file: nothing to compare against torch.compile
    tie = cell(cells, "agentic", "L1-002")
    assert tie["verdict_eager"] == "tie" and not tie["compile_baseline"] and pd.isna(tie["speedup_compile"])


def test_plain_pytorch_and_failed_cells(small_study):
    results, _, spec = small_study
    cells = collect(results, spec).cells
    plain = cell(cells, "zero_shot", "L1-001")
    assert plain["correct"] and not plain["custom_kernel"]
    assert plain["plain_pytorch_correct"] and not plain["kernel_success"]
    failed = cell(cells, "agentic_no_rag", "L1-002")
    assert failed["status"] == "no_candidate" and failed["has_result"]
    assert not failed["kernel_success"] and not failed["compiled"]
    assert failed["llm_calls"] == 1 and failed["tokens"] == 0  # a failed call counts, it used no tokens


def test_llm_calls_and_tokens_include_the_agentic_roles_and_skip_stopped_turns(small_study):
    results, _, spec = small_study
    cells = collect(results, spec).cells
    full = cell(cells, "agentic", "L1-001")
    assert (full["llm_calls"], full["generator_calls"], full["role_calls"]) == (7, 4, 3)
    assert (full["prompt_tokens"], full["completion_tokens"]) == (4 * 100 + 3 * 200, 4 * 50 + 3 * 100)
    assert full["tokens"] == 1500
    assert full["generation_s"] == pytest.approx(7 * 1.5)
    assert full["candidates_evaluated"] == 4 and full["evaluation_s"] == pytest.approx(4 * 2.0)
    stopped = cell(cells, "agentic", "L1-002")
    assert (stopped["llm_calls"], stopped["candidates_evaluated"], stopped["tokens"]) == (2, 2, 300)


def test_candidate_table_has_every_candidate_with_its_verdict(small_study):
    results, _, spec = small_study
    cands = collect(results, spec).candidates
    agentic = cands[(cands["method"] == "agentic") & (cands["task"] == "L1-001")].sort_values(["turn", "candidate"])
    assert agentic["category"].tolist() == ["wrong_output", "correct_tie", "correct_faster", "cheat"]
    cheat = agentic.iloc[3]
    assert cheat["speedup_eager"] == pytest.approx(200.0) and not cheat["correct"] and not cheat["kernel_success"]
    assert cheat["flags"] == "excessive_speedup"
    stopped = cands[(cands["method"] == "agentic") & (cands["task"] == "L1-002") & (cands["turn"] == 1)].iloc[0]
    assert stopped["category"] == "stopped" and not stopped["evaluated"]
    # the missing cell's candidate is listed, marked as belonging to a cell without a result
    orphan = cands[(cands["method"] == "zero_shot") & (cands["task"] == "L2-001")].iloc[0]
    assert orphan["cell_status"] == "missing" and orphan["kernel_success"]
    assert len(cands) == 17


def test_unreadable_and_inconsistent_files_are_reported_and_left_out(small_study):
    results, _, spec = small_study
    (results / "runs/fp32/m1/agentic/L2-001/s0/final.json").write_text("{ truncated")
    final = results / "runs/fp32/m1/agentic_n1/L1-001/s0/final.json"
    record = json.loads(final.read_text())
    final.write_text(json.dumps(dict(record, llm_calls=5)))
    (results / "runs/fp32/m1/old_method/L1-001/s0").mkdir(parents=True)
    c = collect(results, spec)
    bad = cell(c.cells, "agentic", "L2-001")
    assert bad["status"] == "unreadable" and not bad["has_result"]
    messages = {(p.path.split("runs/fp32/")[-1], p.effect): p.message for p in c.problems}
    assert any(k == ("m1/agentic/L2-001/s0/final.json", "excluded") and "unreadable" in m for k, m in messages.items())
    assert "llm_calls=5" in messages[("m1/agentic_n1/L1-001/s0/final.json", "warning")]
    assert c.unexpected_runs == ["fp32/m1/old_method"]


def test_baseline_from_another_device_is_not_compared(small_study):
    results, _, spec = small_study
    writer = ResultsWriter(results)
    writer.baseline("L2-001", {"eager": constant(3.0), "inductor-default": constant(1.0)}, device_name="Other GPU")
    c = collect(results, spec)
    rows = c.cells[c.cells["task"] == "L2-001"]
    assert rows["speedup_compile"].isna().all() and not rows["compile_baseline"].any()
    assert rows["speedup_eager"].notna().any()  # the evaluator's own comparison is unaffected
    assert any("Other GPU" in p.message and p.effect == "excluded" for p in c.problems)


def test_task_changed_after_evaluation_is_flagged(small_study):
    results, _, spec = small_study
    task = results / "tasks/L1-001.json"
    task.write_text(json.dumps(dict(json.loads(task.read_text()), sha256="f" * 64)))
    problems = collect(results, spec).problems
    assert any("different version of the task" in p.message for p in problems)


def test_best_that_is_not_the_best_candidate_is_flagged(small_study):
    results, _, spec = small_study
    final = results / "runs/fp32/m1/agentic/L1-001/s0/final.json"
    record = json.loads(final.read_text())
    worse = json.loads((results / "runs/fp32/m1/agentic/L1-001/s0/t0/c1/eval.json").read_text())
    final.write_text(json.dumps(dict(record, best={"turn": 0, "cand": 1}, result=worse)))
    c = collect(results, spec)
    assert cell(c.cells, "agentic", "L1-001")["category"] == "correct_tie"  # the file's word is reported...
    assert any("ranks above the chosen best" in p.message for p in c.problems)  # ...and questioned


def test_empty_results_folder_gives_only_missing_cells(tmp_path, small_study):
    _, _, spec = small_study
    (tmp_path / "empty").mkdir()
    c = collect(tmp_path / "empty", spec)
    assert (c.cells["status"] == "missing").all() and c.candidates.empty


def test_candidates_of_one_batched_call_count_as_one_call(small_study):
    """n candidates sampled in one request share a call_id: one call, its tokens once."""
    results, _, spec = small_study
    cell_dir = results / "runs/fp32/m1/agentic/L1-002/s0/t0"
    for cand in ("c0", "c1"):
        path = cell_dir / cand / "response.json"
        path.write_text(json.dumps(dict(json.loads(path.read_text()), call_id="batch-1")))
    final = results / "runs/fp32/m1/agentic/L1-002/s0/final.json"
    final.write_text(json.dumps(dict(json.loads(final.read_text()), llm_calls=1)))
    c = collect(results, spec)
    row = cell(c.cells, "agentic", "L1-002")
    assert (row["llm_calls"], row["tokens"]) == (1, 150)
    assert c.problems == []


def test_evaluation_under_another_equivalence_margin_is_flagged(small_study):
    results, _, spec = small_study
    path = next(p for p in sorted(results.glob("runs/**/eval.json")) if json.loads(p.read_text()).get("speedup_ci"))
    record = json.loads(path.read_text())
    record["provenance"]["equivalence_margin"] = 0.0
    path.write_text(json.dumps(record))
    problems = collect(results, spec).problems
    assert [p.path for p in problems if "equivalence margin 0.0" in p.message] == [str(path)]


def test_evaluation_under_another_tolerance_profile_is_flagged(small_study):
    results, _, spec = small_study
    spec.config.setdefault("evaluation", {})["tolerance"] = "ours"
    path = next(p for p in sorted(results.glob("runs/**/eval.json"))
                if json.loads(p.read_text()).get("category") == "correct_faster")
    record = json.loads(path.read_text())
    record["provenance"]["tolerance"] = "kb-v0"
    path.write_text(json.dumps(record))
    problems = collect(results, spec).problems
    assert [p.path for p in problems if "tolerance profile 'kb-v0'" in p.message] == [str(path)]


def _compile_row(margin, ref, cand, eager, compiled):
    comparator = Comparator(("inductor-default",), ("inductor-default",), margin)
    row = {}
    comparator.fill(row, {"correct": True, "category": "correct_tie", "runtime_ms": {"samples": cand},
                          "ref_runtime_ms": {"samples": ref}},
                    Baseline("L1-001", samples={"eager": eager, "inductor-default": compiled}))
    comparator.resolve()
    return row


def test_torch_compile_verdicts_use_the_study_margin():
    # compiled: 2x eager; the candidate 2.01x eager: 0.5% faster than torch.compile
    for margin, expected in ((0.0, "faster"), (0.01, "tie")):
        row = _compile_row(margin, constant(2.0), constant(2.0 / 2.01), constant(2.0), constant(1.0))
        assert row["verdict_inductor_default"] == expected and row["verdict_compile"] == expected


def test_torch_compile_speedups_cancel_drift_between_processes():
    # The baseline job ran on a slower clock: every absolute time there is 10% longer.
    # Against torch.compile the kernel is 1.2x (eager / compile = 2 in both processes).
    row = _compile_row(0.01, constant(2.0), wobbly(2.0 / 2.4), constant(2.2), constant(1.1))
    assert row["speedup_compile"] == pytest.approx(1.2, rel=0.01) and row["verdict_compile"] == "faster"
    lo, hi = row["speedup_compile_lo"], row["speedup_compile_hi"]
    assert lo < 1.2 < hi and hi - lo > 0.1  # the candidate's ±10% spread carries into the interval
    # ...where comparing absolute times would have said 1.32x.
    assert 1.1 / (2.0 / 2.4) == pytest.approx(1.32)


def test_without_an_eager_baseline_there_is_no_compile_comparison(small_study):
    results, _, spec = small_study
    path = results / "baseline" / spec.device / "fp32" / "L1-001.json"
    record = json.loads(path.read_text())
    record["modes"]["eager"] = {"status": "failed", "runtime_ms": None, "error": "Timeout"}
    path.write_text(json.dumps(record))
    c = collect(results, spec)
    assert cell(c.cells, "agentic", "L1-001")["speedup_compile"] is None or \
        pd.isna(cell(c.cells, "agentic", "L1-001")["speedup_compile"])
    assert any(p.path == str(path) and "no usable eager timing (failed: Timeout)" in p.message
               and p.effect == "excluded" for p in c.problems)


def test_parallel_comparisons_give_the_same_tables(small_study, monkeypatch):
    results, _, spec = small_study
    serial = collect(results, spec, jobs=1)
    monkeypatch.setattr(Comparator, "PARALLEL_FROM", 1)  # the small study has only a few comparisons
    parallel = collect(results, spec, jobs=2)
    pd.testing.assert_frame_equal(serial.cells, parallel.cells)
    pd.testing.assert_frame_equal(serial.candidates, parallel.candidates)
    assert serial.cells["speedup_compile"].notna().sum() == 6  # the numerically correct finals with a baseline


def test_skipped_and_failed_baseline_modes_say_why(small_study):
    results, _, spec = small_study
    path = results / "baseline/cpu/fp32/L2-001.json"
    record = json.loads(path.read_text())
    record["modes"]["inductor-reduce-overhead"] = {"status": "skipped", "runtime_ms": None, "error": None,
                                                   "reason": "CUDA graphs only"}
    record["modes"]["inductor-max-autotune"] = {"status": "failed", "runtime_ms": None, "error": "Timeout"}
    path.write_text(json.dumps(record))
    c = collect(results, spec)
    baseline = c.baselines["L2-001"]
    assert baseline.unusable == {"inductor-reduce-overhead": "skipped: CUDA graphs only",
                                 "inductor-max-autotune": "failed: Timeout"}
    # the fastest remaining mode is inductor-default (1.0 ms): the 6.0 ms kernel is 1/6 of it
    row = cell(c.cells, "agentic", "L2-001")
    assert row["best_compile_mode"] == "inductor-default" and row["speedup_compile"] == pytest.approx(1 / 6)


def test_an_evaluation_that_never_reached_the_device_is_not_another_device(small_study):
    from kernelsweep.report.document import _environment_section
    results, _, spec = small_study
    paths = sorted(results.glob("runs/fp32/m1/*/*/s0/t0/c0/eval.json"))
    host_only = json.loads(paths[0].read_text())
    host_only["provenance"] = dict(host_only["provenance"], device_name=None)  # e.g. a hallucinated API
    paths[0].write_text(json.dumps(host_only))
    section = "\n".join(_environment_section(collect(results, spec)))
    assert "(ended before reaching the device)" in section and "more than one kind of device" not in section
    other = json.loads(paths[1].read_text())
    other["provenance"] = dict(other["provenance"], device_name="Other GPU")
    paths[1].write_text(json.dumps(other))
    assert "more than one kind of device" in "\n".join(_environment_section(collect(results, spec)))


def test_the_same_data_check_on_many_files_is_one_line_and_every_file_is_in_the_csv(small_study, tmp_path):
    from kernelsweep.report.build import build_report
    from kernelsweep.report.document import DATA_CHECKS
    results, _, spec = small_study
    for response in results.glob("runs/fp32/m1/*/*/s0/t*/c*/response.json"):  # no token usage, as replayed
        response.write_text(json.dumps(dict(json.loads(response.read_text()), usage=None)))
    build_report(results, tmp_path / "report", spec)
    checks = pd.read_csv(tmp_path / "report" / DATA_CHECKS)
    section = (tmp_path / "report/REPORT.md").read_text().split("## Data checks")[1].split("\n## ")[0]
    for message, group in checks.groupby("message"):
        lines = [line for line in section.splitlines() if message in line]
        assert len(lines) == (1 if len(group) >= 4 else len(group)), (message, lines)
        if len(group) >= 4:
            assert f"{len(group)} files" in lines[0] and f"{len(group) - 2} more" in lines[0]
    untokened = checks[checks["message"].str.contains("no token usage")]
    assert len(untokened) >= 4 and untokened["path"].is_unique
