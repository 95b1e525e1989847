"""Published vs re-measured, and speed of light, on a small results tree: replay
records that carry a study's own verdicts (docs/results.md, "Published verdicts")
and eval records shaped like the evaluator's (synthetic.ResultsWriter)."""

import json

import pytest
from synthetic import DEVICE_NAME, ResultsWriter, constant, wobbly

from kernelsweep.core import metrics
from kernelsweep.study import layout
from kernelsweep.core.fileio import write_json
from kernelsweep.profiling import roofline
from kernelsweep.report import published, speedoflight
from kernelsweep.report.build import build_report
from kernelsweep.report.collect import collect
from kernelsweep.report.spec import parse_study

MODEL = "replayed"
TASKS = [("L1-001", 1, "1_Square_matrix_multiplication_"), ("L1-002", 1, "2_Standard_matrix_multiplication_"),
         ("L2-001", 2, "1_Conv2D_ReLU_BiasAdd"), ("L2-002", 2, "2_ConvTranspose2d_BiasAdd_Clamp")]


def verdict(compiled, correct, speedup, category):
    return {"compiled": compiled, "correct": correct, "speedup": speedup, "category": category}


def line(task, turn, sv, final=True):
    return json.dumps({"task": task, "turn": turn, "raw_response": "```python\nclass ModelNew: pass\n```",
                       "final": final, "study_verdict": sv})


def write_replay(folder, with_verdicts=True):
    folder.mkdir(parents=True)
    zero = [line("L1-001", 0, verdict(True, True, 1.0047, "correct")),      # a 'faster' that is a tie
            line("L1-002", 0, verdict(True, True, 0.97, "slow")),           # 'correct' that is wrong here
            line("L2-001", 0, verdict(False, False, None, "compilation")),  # agrees
            line("L2-002", 0, verdict(True, False, None, "wrong_output"))]  # wrong there, a fast kernel here
    iterative = [line("L1-001", 0, verdict(True, True, 0.98, "slow"), final=False),
                 line("L1-001", 1, verdict(True, True, 1.0, "correct")),     # submitted turn 1
                 line("L1-002", 0, verdict(True, True, 1.1, "correct"))]     # no cell here
    if not with_verdicts:
        zero = [json.dumps({k: v for k, v in json.loads(x).items() if k != "study_verdict"}) for x in zero]
        iterative = [json.dumps({k: v for k, v in json.loads(x).items() if k != "study_verdict"}) for x in iterative]
    (folder / "zero_shot.jsonl").write_text("\n".join(zero) + "\n")
    (folder / "iterative.jsonl").write_text("\n".join(iterative) + "\n")


def profile(w, task, flops, nbytes, peak_flops=1e12, peak_bandwidth=1e11):
    write_json(w.root / layout.PROFILE.format(device=w.device, precision="fp32", task=task), {
        "schema": "kernelsweep/profile/1", "status": "ok", "task": task, "device": w.device, "precision": "fp32",
        "device_name": DEVICE_NAME, "flops": {"total": flops, "by_op": {}, "elementwise_estimate": 0},
        "bytes": {"compulsory": nbytes, "per_op_sum": nbytes},
        "roofline": {"verdict": "memory-bound", "peaks": {"flops": peak_flops, "bandwidth": peak_bandwidth,
                                                          "precision": "fp32", "basis": "datasheet"}}})


def make_study(tmp_path, with_verdicts=True):
    replay = tmp_path / "replay"
    write_replay(replay, with_verdicts)
    w = ResultsWriter(tmp_path / "results", device="cuda")
    for task, level, name in TASKS:
        w.task(task, level, name)
    w.baseline("L2-002", {"eager": constant(3.0), "inductor-default": constant(1.5)})
    profile(w, "L2-002", flops=1e8, nbytes=5e7)  # bound: max(0.1 ms compute, 0.5 ms memory) = 0.5 ms

    def single(task, level, category, ref=None, cand=None):
        record = w.candidate(MODEL, "zero_shot", task, 0, 0, 0, category, ref, cand)
        w.final(MODEL, "zero_shot", task, level, 0, best=(0, 0), result=record, candidates_evaluated=1,
                llm_calls=1, tokens=(100, 50))

    single("L1-001", 1, "no_custom_kernel", constant(2.0), wobbly(2.0))
    single("L1-002", 1, "wrong_output")
    single("L2-001", 2, "compile_error")
    single("L2-002", 2, "correct_faster", constant(3.0), constant(1.0))
    best = w.candidate(MODEL, "iterative", "L1-001", 0, 0, 0, "no_custom_kernel", constant(2.0), wobbly(2.0))
    w.candidate(MODEL, "iterative", "L1-001", 0, 1, 0, "wrong_output")
    w.final(MODEL, "iterative", "L1-001", 1, 0, best=(0, 0), result=best, turns_run=2, candidates_evaluated=2,
            llm_calls=2, tokens=(200, 100))
    study = {"device": "cuda", "precision": "fp32",
             "models": {MODEL: {"backend": "replay", "path": str(replay)}},
             "methods": {"zero_shot": {"strategy": "zero_shot"}, "iterative": {"strategy": "iterative", "turns": 2}},
             "tasks": [{"id": t, "level": lv, "name": n} for t, lv, n in TASKS], "samples": 1,
             "config": {"device": "cuda", "evaluation": {"equivalence_margin": metrics.EQUIVALENCE_MARGIN}}}
    return tmp_path / "results", parse_study(study)


@pytest.fixture
def study(tmp_path):
    return make_study(tmp_path)


def test_published_verdicts_are_read_per_cell_from_the_submitted_record(study):
    results, spec = study
    c = collect(results, spec)
    found = published.load(c)
    assert set(found.verdicts) == ({(MODEL, "zero_shot", t, 0) for t, _, _ in TASKS}
                                   | {(MODEL, "iterative", t, 0) for t in ("L1-001", "L1-002")})
    first = found.verdicts[MODEL, "zero_shot", "L1-001", 0]
    assert first.correct and first.faster and first.speedup == pytest.approx(1.0047)
    assert not found.verdicts[MODEL, "zero_shot", "L1-002", 0].faster  # correct but 0.97: not faster
    submitted = found.verdicts[MODEL, "iterative", "L1-001", 0]
    assert submitted.turn == 1 and submitted.faster  # the record marked final, a speedup of exactly 1.0 counts
    assert found.notes == []


def test_summary_counts_both_sides_with_intervals(study):
    results, spec = study
    c = collect(results, spec)
    summary, cells = published.tables(c, published.load(c))
    rows = {r["method"]: r for r in summary.data.to_dict("records")}
    z = rows["zero_shot"]
    assert z["cells"] == 4 and z["agree"] == 1  # only L2-001 (a build failure on both sides) agrees
    assert (z["published_compiled"], z["published_correct"], z["published_faster"]) == (3, 2, 1)
    assert (z["compiled"], z["correct"], z["kernel_success"], z["faster_eager"]) == (3, 2, 1, 1)
    assert z["compile_cells"] == 1 and z["faster_compile"] == 1  # only L2-002 has a compile baseline: 3.0/1.5 -> 2x
    assert z["published_correct_pct"] == pytest.approx(50.0)
    assert z["published_correct_lo"] is not None and z["published_correct_lo"] <= 50.0 <= z["published_correct_hi"]
    it = rows["iterative"]
    assert it["cells"] == 1 and it["agree"] == 0 and it["published_faster"] == 1 and it["faster_eager"] == 0
    assert it["cells_missing_here"] == 1  # L1-002 has a published verdict but no final.json here
    view = summary.parts[0].frame.to_dict("records")
    assert view[0]["published correct"].startswith("2 (50.0 [") and view[0]["cells that agree"] == "1 of 4"


def test_disagreements_name_the_reason(study):
    results, spec = study
    c = collect(results, spec)
    _, cells = published.tables(c, published.load(c))
    why = {(r["method"], r["task"]): r["reasons"] for r in cells.data.to_dict("records")}
    assert why["zero_shot", "L2-001"] == ""
    assert why["zero_shot", "L1-002"] == "published correct, here wrong_output"
    tie = why["zero_shot", "L1-001"].split("; ")
    assert tie[0] == "correct, but no custom kernel (plain PyTorch)"
    assert tie[1] == "published faster (1.005×, itself within the 1 % margin)"
    assert tie[2].startswith("here 1.") and tie[2].endswith("a tie within the 1 % margin")
    kernel = why["zero_shot", "L2-002"]
    assert kernel == ("published wrong_output, here correct (correct_faster); "
                      "published not faster; here faster, 3.000× [3.000, 3.000]")
    assert why["iterative", "L1-002"] == "published correct, no result here (missing)"
    it = why["iterative", "L1-001"]
    assert it.startswith("correct, but no custom kernel (plain PyTorch); published faster (1.000×, itself within")
    shown = {(r["method"], r["task"]): r for r in cells.parts[0].frame.to_dict("records")}
    assert ("zero_shot", "L2-001") not in shown  # agreeing cells are only in the CSV
    assert shown["iterative", "L1-001"]["published (turn)"] == "correct faster 1.000× ('correct') (t1)"
    assert shown["iterative", "L1-001"]["here (best turn)"].startswith("no_custom_kernel 1.") \
        and shown["iterative", "L1-001"]["here (best turn)"].endswith("(t0)")


def test_speed_of_light_fraction_beside_the_speedup(study):
    results, spec = study
    c = collect(results, spec)
    rows = speedoflight.rows(results, c)
    assert len(rows) == 1  # the one correct custom kernel; plain PyTorch has no fraction
    r = rows[0]
    assert (r["task"], r["final"], r["bound_limit"]) == ("L2-002", True, "memory")
    assert r["bound_ms"] == pytest.approx(0.5) and r["fraction_of_bound"] == pytest.approx(0.5)
    assert r["ref_fraction_of_bound"] == pytest.approx(0.5 / 3.0) and r["speedup_eager"] == pytest.approx(3.0)
    view = speedoflight.table(results, c).parts[0].frame.to_dict("records")[0]
    assert view["% of speed of light"] == "50.0 %" and view["eager PyTorch % of it"] == "16.7 %"
    assert view["speedup vs eager"].startswith("3.00x")


def test_roofline_bound_is_the_slower_of_compute_and_memory():
    peaks = {"flops": 1e12, "bandwidth": 1e11, "basis": "datasheet"}
    assert roofline.bound_time_s(1e9, 1e6, peaks) == {"seconds": pytest.approx(1e-3), "limit": "compute",
                                                      "reason": None}
    assert roofline.bound_time_s(1e6, 1e9, peaks)["limit"] == "memory"
    assert roofline.bound_time_s(1e9, 1e6, {"flops": None, "bandwidth": 1e11, "reason": "no peaks"})["seconds"] is None


def test_report_has_both_sections_and_a_study_without_verdicts_has_none(tmp_path):
    results, spec = make_study(tmp_path / "a")
    text = (build_report(results, results / "report", spec).files[-1]).read_text()
    assert "## Published vs re-measured" in text and "published correct, here wrong_output" in text
    assert "## Speed of light" in text and (results / "report" / "tables" / "published_cells.csv").is_file()
    results, spec = make_study(tmp_path / "b", with_verdicts=False)
    text = (build_report(results, results / "report", spec).files[-1]).read_text()
    assert "Published vs re-measured" not in text and "## Speed of light" in text


def test_malformed_verdicts_are_left_out_and_said(tmp_path):
    path = tmp_path / "zero_shot.jsonl"
    path.write_text(line("L1-001", 0, {"compiled": True, "correct": "yes"}) + "\n"
                    + line("L1-002", 0, verdict(True, True, 1.2, "correct")) + "\n")
    chosen, notes = published.read_file(path)
    assert list(chosen) == [("L1-002", 0)] and len(notes) == 1 and "zero_shot.jsonl:1" in notes[0]


def test_the_published_study_counts_of_the_shared_replay_set(shared_dir):
    """The README's published column comes from the replay files' own verdicts."""
    folder = shared_dir / "replay" / "kernelbench-agentic"
    expected = {"zero_shot": (21, 9, 4), "guided": (23, 13, 8), "iterative": (20, 9, 3)}
    for method, counts in expected.items():
        chosen, notes = published.read_file(folder / f"{method}.jsonl")
        assert notes == [] and len(chosen) == 30, method
        v = chosen.values()
        assert (sum(bool(p.compiled) for p in v), sum(p.correct for p in v), sum(p.faster for p in v)) == counts
        if method == "iterative":
            # the record marked final, not simply the last turn: L1-009's submission is its turn 0
            assert {task: p.turn for (task, _), p in chosen.items() if p.turn != 2} == {"L1-009": 0}
