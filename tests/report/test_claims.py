"""The claims section from synthetic result records: each claim's outcome and
reason, the counts overall and per level, the reference check and the figure."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
from synthetic import ResultsWriter, constant, wobbly

from kernelsweep.core import metrics
from kernelsweep.report import claims
from kernelsweep.report.build import build_report
from kernelsweep.report.collect import collect
from kernelsweep.report.spec import parse_study

MODEL, METHOD = "pub", "rows"
M = metrics.EQUIVALENCE_MARGIN
TASKS = [("L1-001", 1, "1_a"), ("L1-002", 1, "2_b"), ("L1-003", 1, "3_c"), ("L1-004", 1, "4_d"),
         ("L2-001", 2, "1_e"), ("L2-002", 2, "2_f"), ("L2-003", 2, "3_g"), ("L3-001", 3, "1_h")]


def _claim(eager, **other):
    return {"eager": eager, "torch.compile-default": None, "torch.compile-reduce-overhead": None,
            "cuda-graph": other.get("cuda_graph"), "cudnn-benchmark": None}


def make_study(tmp_path, precisions=("fp32",)):
    for precision in precisions:
        write_rows(ResultsWriter(tmp_path / "results", precision=precision), tmp_path)
    study = {"device": "cpu", "precisions": list(precisions),
             "models": {MODEL: {"backend": "corpus", "format": "jsonl", "path": "c.jsonl"}},
             "methods": {METHOD: {"strategy": "zero_shot"}},
             "tasks": [{"id": t, "level": lv, "name": n} for t, lv, n in TASKS], "samples": 1,
             "baseline_modes": ["eager"],
             "config": {"device": "cpu", "evaluation": {"equivalence_margin": M}}}
    return tmp_path / "results", parse_study(study)


def write_rows(w, tmp_path):
    for task, level, name in TASKS:
        w.task(task, level, name)
    reference = json.loads((tmp_path / "results/tasks/L1-001.json").read_text())["code"]

    def row(task, level, category, claimed, ref=None, cand=None, ref_code=None, **eval_kw):
        record = w.candidate(MODEL, METHOD, task, 0, 0, 0, category, ref, cand, **eval_kw)
        path = w.cell_dir(MODEL, METHOD, task, 0) / "t0/c0/response.json"
        response = json.loads(path.read_text())
        response["meta"] = {"corpus": {"file": "c.jsonl", "where": f"c.jsonl:{task}", "format": "jsonl",
                                       "claims": claimed, "atol": 1e-2, "rtol": 1e-2, "ref_code": ref_code}}
        path.write_text(json.dumps(response))
        w.final(MODEL, METHOD, task, level, 0, best=(0, 0), result=record, candidates_evaluated=1, llm_calls=1)

    row("L1-001", 1, "correct_faster", _claim(3.0, cuda_graph=2.0), constant(2.0), constant(1.0), ref_code=reference)
    row("L1-002", 1, "wrong_output", _claim(2.0), ref_code="import torch\nN = 1\n")
    row("L1-003", 1, "correct_slower", _claim(1.8), constant(1.0), constant(2.0))  # 0.5x
    row("L1-004", 1, "correct_tie", _claim(1.5), wobbly(1.0), wobbly(1.0))  # an interval across 1 + m
    row("L2-001", 2, "compile_error", _claim(4.0))
    row("L2-002", 2, "no_code", _claim(None))
    row("L2-003", 2, "correct_tie", _claim(0.9), constant(1.0), constant(1.0))  # claimed no speedup: confirmed
    row("L3-001", 3, "no_custom_kernel", _claim(1.2), constant(2.0), constant(1.0))


EXPECTED = {  # task: (outcome, words of the reason)
    "L1-001": ("confirmed", "faster: 2×"),
    "L1-002": ("refuted", "wrong_output: wrong output"),
    "L1-003": ("refuted", "claimed 1.8×; measured 0.5×"),
    "L1-004": ("not reproducible", "timing inconclusive"),
    "L2-001": ("not reproducible", "compile_error: the build failed on this machine (synthetic compile_error)"),
    "L2-002": ("no claim", "nothing claimed; here no_code"),
    "L2-003": ("confirmed", "claimed 0.9× (no speedup)"),
    "L3-001": ("refuted", "no_custom_kernel: correct, but no custom kernel"),
}


@pytest.fixture
def frame(tmp_path):
    results, spec = make_study(tmp_path)
    return claims.claim_rows(results, collect(results, spec)).set_index("task")


def test_each_claim_gets_its_outcome_and_reason(frame):
    for task, (outcome, words) in EXPECTED.items():
        assert frame.loc[task, "outcome"] == outcome, (task, frame.loc[task, "reason"])
        assert words in frame.loc[task, "reason"], (task, frame.loc[task, "reason"])
    assert frame.loc["L1-001", "claimed"] == 3.0 and frame.loc["L1-001", "measured"] == pytest.approx(2.0)
    assert frame.loc["L1-001", "claimed cuda-graph"] == 2.0
    assert frame["measured torch.compile-default"].isna().all()  # the study times no torch.compile mode
    assert bool(frame.loc["L1-001", "within_factor"])  # 2.0 reaches 3.0 / 2
    assert frame.loc["L1-001", "claimed_atol"] == 1e-2


def test_the_corpus_reference_is_checked_against_the_tasks(frame):
    assert frame.loc["L1-001", "reference"] == "same"
    assert frame.loc["L1-002", "reference"].startswith("differs: ")
    assert frame.loc["L1-003", "reference"] == "not given"


def test_counts_overall_and_per_level(frame):
    counts = claims.summary(frame.reset_index()).set_index("level")
    assert list(counts.index) == ["all", "L1", "L2", "L3"]
    got = counts[["rows", "claimed", "confirmed", "refuted", "not reproducible", "no claim"]].to_dict("index")
    assert got["all"] == {"rows": 8, "claimed": 7, "confirmed": 2, "refuted": 3, "not reproducible": 2, "no claim": 1}
    assert got["L1"] == {"rows": 4, "claimed": 4, "confirmed": 1, "refuted": 2, "not reproducible": 1, "no claim": 0}
    assert got["L2"] == {"rows": 3, "claimed": 2, "confirmed": 1, "refuted": 0, "not reproducible": 1, "no claim": 1}
    assert got["L3"] == {"rows": 1, "claimed": 1, "confirmed": 0, "refuted": 1, "not reproducible": 0, "no claim": 0}
    # L1-001 (2x of 3x claimed) and L2-003 (1x of 0.9x) reach their claims within a factor 2
    assert counts.loc["all", "reference differs"] == 1 and counts.loc["all", "confirmed, within factor"] == 2


@pytest.mark.parametrize("cell, outcome", [
    ({"has_result": False, "status": "missing"}, "not reproducible"),
    ({"has_result": True, "category": "cheat"}, "refuted"),
    ({"has_result": True, "category": "wrong_on_variant"}, "refuted"),
    ({"has_result": True, "category": "indistinguishable"}, "not reproducible"),
    ({"has_result": True, "category": "correct_unstable"}, "not reproducible"),
    ({"has_result": True, "category": "correct_faster", "speedup_eager": 2.0}, "not reproducible"),  # no interval
    ({"has_result": True, "category": "correct_tie", "speedup_eager": 1.0, "speedup_eager_lo": 0.99,
      "speedup_eager_hi": 1 + M}, "refuted"),  # at most 1 + m: no speedup beyond the margin
])
def test_judge_edges(cell, outcome):
    assert claims.judge(2.0, cell, M)[0] == outcome


def test_every_category_has_one_rule():
    from kernelsweep.core.verdict import CATEGORIES, SUCCESS_CATEGORIES

    ruled = set(claims.REFUTED_BY) | set(claims.NOT_REPRODUCIBLE_BY)
    assert not set(claims.REFUTED_BY) & set(claims.NOT_REPRODUCIBLE_BY)
    assert set(CATEGORIES) - ruled == SUCCESS_CATEGORIES - {"correct_unstable"}


def test_report_has_the_claims_section_and_figure(tmp_path):
    results, spec = make_study(tmp_path)
    text = build_report(results, results / "report", spec).files[-1].read_text()
    assert "## Published claims" in text and "## Published claims: per row" in text
    assert "| L1-003 |" in text and "wrong_output: wrong output" in text
    table = pd.read_csv(results / "report/tables/claims.csv")
    assert table.loc[table["level"] == "all", "confirmed"].item() == 2
    assert (results / "report/figures/claims.svg").is_file()


def test_a_study_without_a_corpus_has_no_claims_section(tmp_path):
    from synthetic import write_small_study, SMALL_STUDY

    write_small_study(tmp_path / "results")
    spec = parse_study(SMALL_STUDY)
    assert claims.tables(tmp_path / "results", collect(tmp_path / "results", spec)) == []


def test_figure_with_no_timed_row_says_so():
    fig = claims.figure(pd.DataFrame({"claimed": [2.0], "measured": [math.nan], "measured_lo": [math.nan],
                                      "measured_hi": [math.nan], "outcome": ["refuted"]}))
    assert "no row both claimed and timed" in fig.axes[0].texts[0].get_text()


def test_a_study_of_two_precisions_breaks_the_claims_down(tmp_path):
    results, spec = make_study(tmp_path, precisions=("fp32", "bf16"))
    build_report(results, results / "report", spec)
    rows = pd.read_csv(results / "report/tables/claims_rows.csv")
    assert list(rows.columns[:2]) == ["precision", "model"] and len(rows) == 2 * len(TASKS)
    counts = pd.read_csv(results / "report/tables/claims.csv")
    assert sorted(counts.loc[counts["level"] == "all", "precision"]) == ["bf16", "fp32"]
    for precision in ("fp32", "bf16"):
        assert (results / f"report/figures/claims-{precision}.svg").is_file()


def test_outcomes_are_broken_down_by_verdict(tmp_path):
    results, spec = make_study(tmp_path)
    [summary_table, _] = claims.tables(results, collect(results, spec))
    by_verdict = summary_table.parts[1].frame
    assert summary_table.parts[1].title == "By the evaluator's verdict"
    assert list(zip(by_verdict["outcome"], by_verdict["verdict"], by_verdict["rows"])) == [
        ("confirmed", "correct_faster", 1), ("confirmed", "correct_tie", 1),
        ("refuted", "correct_slower", 1), ("refuted", "no_custom_kernel", 1), ("refuted", "wrong_output", 1),
        ("not reproducible", "compile_error", 1), ("not reproducible", "correct_tie", 1),
        ("no claim", "no_code", 1)]
