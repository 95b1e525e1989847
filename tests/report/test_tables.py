"""The study's tables on the small synthetic study, against numbers computed by
hand from the files tests/report/synthetic.py writes (see its comments)."""

import json
import math

import pandas as pd
import pytest
from synthetic import AGENTIC, MODEL, ResultsWriter, constant

from kernelsweep.core import verdict
from kernelsweep.report import document, tables
from kernelsweep.report.collect import collect
from kernelsweep.report.spec import parse_study


@pytest.fixture
def collected(small_study):
    results, _, spec = small_study
    c = collect(results, spec)
    return c.cells, c.candidates, spec


def rows_by_method(frame):
    return {r["method"]: r for r in frame.to_dict("records")}


def test_headline_numbers(collected):
    cells, _, spec = collected
    h = rows_by_method(tables.headline(cells, spec).data)
    third = 100 / 3
    expected = {
        #                 cells missing failed compiled correct kernel plain fast_0/1/1.5/2 (eager)
        "zero_shot": (2, 1, 0, 50.0, 50.0, 0.0, 1, (0.0, 0.0, 0.0, 0.0)),
        "agentic": (3, 0, 0, 100.0, 100.0, 100.0, 0, (100.0, third, third, 0.0)),
        "agentic_no_rag": (3, 0, 1, 2 * third, third, third, 0, (third, third, third, third)),
        "agentic_n1": (3, 0, 0, 100.0, 100.0, 2 * third, 1, (2 * third, 2 * third, third, 0.0)),
    }
    for method, (n, missing, failed, compiled, correct, kernel, plain, fast) in expected.items():
        r = h[method]
        assert (r["cells_with_result"], r["cells_missing"], r["cells_failed"]) == (n, missing, failed), method
        assert r["compiled_pct"] == pytest.approx(compiled) and r["correct_pct"] == pytest.approx(correct), method
        assert r["kernel_success_pct"] == pytest.approx(kernel) and r["plain_pytorch_correct"] == plain, method
        assert [r[f"fast_{p}_eager_pct"] for p in ("0", "1", "1.5", "2")] == pytest.approx(list(fast)), method
        assert r["cheats"] == 0  # the cheat was a candidate, never a final result
    # fast_2 needs the interval strictly above 2: the 2.0x kernel with interval [2, 2] is not in it
    assert h["agentic"]["fast_2_eager_pct"] == 0.0
    # ties are ties: agentic has one faster, one tie, one slower kernel against eager
    assert (h["agentic"]["faster_eager"], h["agentic"]["tie_eager"], h["agentic"]["slower_eager"]) == (1, 1, 1)
    # geometric means over correct custom kernels only
    assert h["agentic"]["geomean_eager"] == pytest.approx((2.0 * 1.0 * 0.5) ** (1 / 3))
    assert h["agentic_n1"]["geomean_eager"] == pytest.approx(math.sqrt(2.0 * 1.5))
    assert h["agentic_no_rag"]["geomean_eager"] == pytest.approx(8.0) and h["agentic_no_rag"]["geomean_eager_n"] == 1
    assert pd.isna(h["zero_shot"]["geomean_eager"])


def test_headline_against_torch_compile(collected):
    cells, _, spec = collected
    h = rows_by_method(tables.headline(cells, spec).data)
    # L1-002 has no baseline, so the denominators are the cells of L1-001 and L2-001
    assert {m: r["cells_compile"] for m, r in h.items()} == {
        "zero_shot": 1, "agentic": 2, "agentic_no_rag": 2, "agentic_n1": 2}
    # agentic: 1.0x (a tie, [1, 1]) on L1-001 and 0.4x on L2-001
    assert h["agentic"]["fast_0_compile_pct"] == 100.0 and h["agentic"]["fast_1_compile_pct"] == 0.0
    assert (h["agentic"]["faster_compile"], h["agentic"]["tie_compile"], h["agentic"]["slower_compile"]) == (0, 1, 1)
    assert h["agentic"]["geomean_compile"] == pytest.approx(math.sqrt(1.0 * 0.8 / 6.0))
    # agentic_no_rag: its 4x kernel beats the 1.0 ms reduce-overhead baseline by 4x
    assert h["agentic_no_rag"]["fast_2_compile_pct"] == 50.0


def test_headline_intervals_are_over_tasks(collected):
    cells, _, spec = collected
    h = rows_by_method(tables.headline(cells, spec).data)
    assert (h["agentic"]["kernel_success_lo"], h["agentic"]["kernel_success_hi"]) == (100.0, 100.0)
    r = h["agentic_n1"]
    assert r["kernel_success_lo"] <= r["kernel_success_pct"] <= r["kernel_success_hi"]
    assert r["kernel_success_lo"] < r["kernel_success_hi"]


def test_headline_view_states_denominators_and_plain_pytorch(collected):
    cells, _, spec = collected
    table = tables.headline(cells, spec)
    correctness = rows_by_method(table.parts[0].frame)
    assert correctness["zero_shot"]["cells"] == "2 (1 missing)"
    assert correctness["zero_shot"]["correct plain PyTorch"] == "1 (50.0%)"
    assert correctness["zero_shot"]["correct custom kernel %"] == "0.0 [0.0, 0.0]"
    assert "Missing cells (no final.json) are left out of every denominator" in table.note
    text = tables.to_markdown(table)
    assert "| agentic " in text and "faster / tie / slower" in text and "1 / 1 / 1" in text


def test_levels(collected):
    cells, _, spec = collected
    data = tables.by_level(cells, spec).data
    got = {(r["method"], r["level"]): (r["cells_with_result"], r["cells_missing"], r["kernel_success"],
                                       r["plain_pytorch_correct"]) for r in data.to_dict("records")}
    assert got == {
        ("zero_shot", 1): (2, 0, 0, 1), ("zero_shot", 2): (0, 1, 0, 0),
        ("agentic", 1): (2, 0, 2, 0), ("agentic", 2): (1, 0, 1, 0),
        ("agentic_no_rag", 1): (2, 0, 1, 0), ("agentic_no_rag", 2): (1, 0, 0, 0),
        ("agentic_n1", 1): (2, 0, 1, 1), ("agentic_n1", 2): (1, 0, 1, 0),
    }


def test_component_ablation_deltas(collected):
    cells, _, spec = collected
    table = tables.ablation(cells, spec)
    rows = rows_by_method(table.data)
    assert list(rows) == ["agentic", "agentic_no_rag"]  # agentic_n1 differs in n: best-of-n, not here
    no_rag = rows["agentic_no_rag"]
    assert no_rag["change"] == "without researcher"
    assert no_rag["kernel_success_delta"] == pytest.approx(100 / 3 - 100)
    assert no_rag["kernel_success_paired_tasks"] == 3
    assert no_rag["fast_1_eager_delta"] == pytest.approx(0.0)
    assert no_rag["fast_1_compile_delta"] == pytest.approx(50.0) and no_rag["fast_1_compile_paired_tasks"] == 2
    assert rows["agentic"]["change"] == "full system"


def test_best_of_n(collected):
    cells, _, spec = collected
    data = tables.best_of_n(cells, spec).data
    assert data["n"].tolist() == [1, 2] and data["method"].tolist() == ["agentic_n1", "agentic"]
    assert data["kernel_success_pct"].tolist() == pytest.approx([200 / 3, 100.0])
    assert data["llm_calls_per_cell"].tolist() == pytest.approx([1.0, (7 + 2 + 1) / 3])
    assert data["tokens_per_cell"].tolist() == pytest.approx([150.0, (1500 + 300 + 150) / 3])


def test_taxonomy_counts_every_category_in_order(collected):
    cells, candidates, spec = collected
    table = tables.taxonomy(cells, candidates, spec)
    assert list(table.parts[0].frame.columns)[1:1 + len(verdict.CATEGORIES)] == list(verdict.CATEGORIES)
    data = table.data
    final = {r["method"]: r for r in data[data["scope"] == "final"].to_dict("records")}
    nonzero = {m: {k: v for k, v in r.items() if k in verdict.CATEGORIES + ("no_candidate",) and v}
               for m, r in final.items()}
    assert nonzero == {
        "zero_shot": {"compile_error": 1, "no_custom_kernel": 1},
        "agentic": {"correct_slower": 1, "correct_tie": 1, "correct_faster": 1},
        "agentic_no_rag": {"wrong_output": 1, "correct_faster": 1, "no_candidate": 1},
        "agentic_n1": {"no_custom_kernel": 1, "correct_faster": 2},
    }
    assert final["zero_shot"]["missing"] == 1 and final["zero_shot"]["total"] == 2
    every = {r["method"]: r for r in data[data["scope"] == "candidates"].to_dict("records")}
    assert {k: v for k, v in every["agentic"].items() if k in verdict.CATEGORIES and v} == {
        "runtime_error": 1, "wrong_output": 1, "cheat": 1, "correct_slower": 1, "correct_tie": 2, "correct_faster": 1}
    assert every["agentic"]["total"] == 7  # the stopped turn is not a candidate
    assert every["zero_shot"]["total"] == 2  # the missing cell's candidate is not counted
    assert every["agentic_no_rag"]["generation_failed"] == 1


def test_per_task_lists_every_final_verdict(collected):
    cells, _, spec = collected
    view = {r["task"]: r for r in tables.per_task(cells, spec).parts[0].frame.to_dict("records")}
    assert view["L1-001"]["zero_shot"] == "no_custom_kernel 1.00x"
    assert view["L2-001"]["zero_shot"] == "missing"
    assert view["L1-002"]["agentic_no_rag"] == "no_candidate"
    assert view["L2-001"]["agentic"] == "correct_slower 0.50x"
    assert view["L1-002"]["agentic"] == "correct_tie 1.00x"


def test_samples_average_within_a_task_before_averaging_tasks(tmp_path):
    """Task A succeeds in 1 of 2 samples, task B in 2 of 2: the rate is (0.5 + 1) / 2."""
    study = {"device": "cpu", "models": {MODEL: {"backend": "openai"}}, "methods": {"agentic": AGENTIC},
             "tasks": [{"id": "L1-001", "level": 1}, {"id": "L1-002", "level": 1}], "samples": 2}
    spec = parse_study(study)
    w = ResultsWriter(tmp_path)
    outcomes = {("L1-001", 0): "correct_faster", ("L1-001", 1): "wrong_output",
                ("L1-002", 0): "correct_faster", ("L1-002", 1): "correct_faster"}
    for (task, sample), category in outcomes.items():
        w.task(task, 1, task)
        timed = (constant(2.0), constant(1.0)) if category == "correct_faster" else (None, None)
        record = w.candidate(MODEL, "agentic", task, sample, 0, 0, category, *timed)
        w.final(MODEL, "agentic", task, 1, sample, best=(0, 0), result=record, candidates_evaluated=1, llm_calls=1)
    cells = collect(tmp_path, spec).cells
    row = tables.headline(cells, spec).data.iloc[0]
    assert row["kernel_success_pct"] == pytest.approx(75.0)
    assert row["cells_with_result"] == 4 and row["tasks_with_result"] == 2
    view = {r["task"]: r["agentic"] for r in tables.per_task(cells, spec).parts[0].frame.to_dict("records")}
    assert view["L1-001"] == "correct_faster 2.00x; wrong_output"


def test_tables_of_a_study_without_results(tmp_path, small_study):
    _, _, spec = small_study
    (tmp_path / "none").mkdir()
    c = collect(tmp_path / "none", spec)
    built = tables.build_tables(c.cells, c.candidates, spec)
    h = rows_by_method(built[0].data)
    assert h["agentic"]["cells_with_result"] == 0 and pd.isna(h["agentic"]["kernel_success_pct"])
    assert "n/a" in tables.to_markdown(built[0])
    assert all(isinstance(tables.to_markdown(t), str) for t in built)


def test_wrong_on_variant_counts_as_correct_on_the_task_shape_only(small_study):
    import json

    results, _, spec = small_study
    final = results / "runs/fp32/m1/agentic/L1-001/s0/final.json"
    record = json.loads(final.read_text())
    record["result"].update(category="wrong_on_variant", correct=False, custom_kernel=False, speedup=None,
                            speedup_ci=None, timing_verdict=None, faster=None)
    final.write_text(json.dumps(record))
    cells = collect(results, spec).cells
    headline = tables.headline(cells, spec)
    r = rows_by_method(headline.data)["agentic"]
    assert r["correct_pct"] == pytest.approx(200 / 3) and r["correct_task_shape_pct"] == pytest.approx(100.0)
    assert r["kernel_success_pct"] == pytest.approx(200 / 3)
    part = rows_by_method(headline.parts[0].frame)
    assert part["agentic"]["correct on the task's shape %"].startswith("100")
    assert "wrong_on_variant" in headline.note
    # without variants both columns agree
    assert all(row["correct_task_shape_pct"] == row["correct_pct"]
               for m, row in rows_by_method(headline.data).items() if m != "agentic")


def test_a_degenerate_task_is_marked_in_the_per_task_table_and_named_in_the_report(small_study):
    """Issue 36: a task validation found degenerate (its outputs do not depend
    on its inputs) is marked in the per-task table and listed, with the
    reason, in REPORT.md; the other tasks are not."""
    results, _, spec = small_study
    reason = "the outputs do not depend on the inputs: at the default init, on 3 input draws every output is zero"
    ResultsWriter(results).task("L1-002", 1, "2_Standard_matrix_multiplication_", degenerate=reason)
    c = collect(results, spec)
    marked = c.cells.drop_duplicates("task").set_index("task")["task_degenerate"].to_dict()
    assert marked == {"L1-001": False, "L1-002": True, "L2-001": False}
    assert c.degenerate_tasks == {"L1-002": reason}
    built = tables.build_tables(c.cells, c.candidates, spec)
    view = {r["task"]: r["degenerate"] for r in tables.per_task(c.cells, spec).parts[0].frame.to_dict("records")}
    assert view == {"L1-001": "", "L1-002": "yes", "L2-001": ""}
    text = document.render(c, built, str(results))
    assert f"- Degenerate tasks (1), whose outputs did not depend on their inputs when they were validated: " \
           f"`L1-002` ({reason})." in text
    assert "`indistinguishable`, never correct" in text


def test_the_report_says_when_no_task_is_degenerate_and_which_were_not_checked(small_study):
    results, _, spec = small_study
    c = collect(results, spec)
    text = document.render(c, tables.build_tables(c.cells, c.candidates, spec), str(results))
    assert "- Degenerate tasks: none found when the tasks were validated." in text
    path = results / "tasks" / "L2-001.json"
    record = json.loads(path.read_text())
    record["validation"] = dict(record["validation"], forward="skipped", degenerate=None)
    path.write_text(json.dumps(record))
    c = collect(results, spec)
    text = document.render(c, tables.build_tables(c.cells, c.candidates, spec), str(results))
    assert "- Degenerate tasks: none found when the tasks were validated (1 task(s) not checked" in text
