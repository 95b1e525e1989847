"""The report on real model output: the 150 published responses of a prior study
(shared/replay), laid out as raw result files with that study's verdicts. Its
'correct' answers are all plain PyTorch (no __global__ kernel in any of them,
checked here), so the report must count them as plain PyTorch and find no kernel
success at all, where the prior study reported up to 8 of 30 'correct'."""

import json

import pytest
from synthetic import ResultsWriter

from kernelsweep.report.collect import collect
from kernelsweep.report.spec import parse_study
from kernelsweep.report.tables import build_tables

METHODS = ("zero_shot", "guided", "iterative")
# the prior study's labels -> this taxonomy (a correct answer without a kernel is no_custom_kernel)
CATEGORY = {"compilation": "compile_error", "hallucinated_api": "hallucinated_api", "shape_mismatch": "shape_mismatch",
            "wrong_output": "wrong_output", "memory": "out_of_memory", "slow": "no_custom_kernel",
            "correct": "no_custom_kernel"}


@pytest.fixture
def replay(shared_dir, tmp_path):
    folder = shared_dir / "replay" / "kernelbench-agentic"
    rows = {m: [json.loads(line) for line in (folder / f"{m}.jsonl").read_text().splitlines() if line.strip()]
            for m in METHODS}
    w = ResultsWriter(tmp_path / "results", device="cuda")
    tasks = {}
    for method, entries in rows.items():
        turns = {e["task"]: sum(1 for f in entries if f["task"] == e["task"]) for e in entries}
        for entry in entries:
            task, level = entry["task"], int(entry["task"][1])
            tasks[task] = {"id": task, "level": level, "name": entry["problem_name"].removesuffix(".py")}
            sv = entry["study_verdict"]
            record = w.eval_record(task, CATEGORY[sv["category"]])
            record.update(compiled=sv["compiled"], speedup=sv.get("speedup"))
            folder_ = w.cell_dir("qwen7b", method, task, 0) / f"t{entry['turn']}" / "c0"
            (folder_).mkdir(parents=True, exist_ok=True)
            (folder_ / "eval.json").write_text(json.dumps(record))
            (folder_ / "response.json").write_text(json.dumps(w.response()))
            if entry["final"]:
                w.final("qwen7b", method, task, level, 0, best=(entry["turn"], 0), result=record,
                        turns_run=turns[task], candidates_evaluated=turns[task], llm_calls=turns[task])
    study = {"device": "cuda", "models": {"qwen7b": {"backend": "replay"}},
             "methods": {m: {"strategy": m} for m in METHODS}, "tasks": sorted(tasks.values(), key=lambda t: t["id"])}
    return tmp_path / "results", parse_study(study), rows


def test_prior_correct_answers_are_plain_pytorch_not_kernels(replay):
    results, spec, rows = replay
    for entries in rows.values():
        for entry in entries:
            if entry["study_verdict"]["correct"]:
                assert "__global__" not in (entry["extracted_code"] or "")
    c = collect(results, spec)
    assert len(c.cells) == 90 and int(c.cells["has_result"].sum()) == 90
    headline = {r["method"]: r for r in build_tables(c.cells, c.candidates, spec)[0].data.to_dict("records")}
    for method, entries in rows.items():
        finals = [e["study_verdict"] for e in entries if e["final"]]
        assert len(finals) == 30
        r = headline[method]
        assert r["kernel_successes"] == 0 and r["kernel_success_pct"] == 0.0, method
        assert r["plain_pytorch_correct"] == sum(v["correct"] for v in finals), method
        assert r["compiled_pct"] == pytest.approx(100 * sum(v["compiled"] for v in finals) / 30), method
        assert r["fast_1_eager_pct"] == 0.0 and r["fast_0_eager_pct"] == 0.0, method
    # iterative keeps every turn as a candidate: 3 turns x 30 tasks
    assert int((c.candidates["method"] == "iterative").sum()) == len(rows["iterative"]) == 90


def test_real_output_raises_no_false_alarm(replay):
    """Consistent raw files of real output: no data problem is reported (in particular
    no 'ranks above the chosen best' where the submitted turn only ties an earlier one)."""
    results, spec, _ = replay
    c = collect(results, spec)
    assert c.problems == [] and c.unexpected_runs == []


def test_published_vs_remeasured_on_the_real_records(replay, shared_dir):
    """With the replay source named in the study, the report reads the study's own
    verdicts: every cell it called correct is plain PyTorch here, so each of them is
    a disagreement for that reason (these eval records copy its other verdicts)."""
    from kernelsweep.report import published

    results, spec, rows = replay
    folder = shared_dir / "replay" / "kernelbench-agentic"
    spec = parse_study({"device": "cuda", "models": {"qwen7b": {"backend": "replay", "path": str(folder)}},
                        "methods": {m: {"strategy": m} for m in METHODS},
                        "tasks": [{"id": t.id, "level": t.level, "name": t.name} for t in spec.tasks]})
    c = collect(results, spec)
    found = published.load(c)
    assert len(found.verdicts) == 90 and found.notes == []
    summary, cells = published.tables(c, found)
    by_method = {r["method"]: r for r in summary.data.to_dict("records")}
    for method, entries in rows.items():
        finals = [e["study_verdict"] for e in entries if e["final"]]
        r = by_method[method]
        assert r["published_correct"] == r["correct"] == sum(v["correct"] for v in finals), method
        assert r["kernel_success"] == 0 and r["agree"] == 30 - r["published_correct"], method
    for r in cells.data.to_dict("records"):
        assert r["reasons"].startswith("correct, but no custom kernel") == bool(r["published_correct"])
