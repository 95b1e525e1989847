"""The study DAG end to end on the CPU, with a replay model so every verdict is
known in advance: a killed run resumes, every cell gets its final.json, a
second run does nothing, deleting one eval.json reruns only what depends on it.
One study serves every test here: it is SIGKILLed once its first evaluation is
written and then resumed by the same command (a whole study takes minutes on
two cores; an uninterrupted run is the reference of tests/workflow/test_outages.py).
(The embedded model runs the same DAG in tests/slurm/test_slurm_demo.py and in
the README's demo.)"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
import yaml

from kernelsweep.study.matrix import REPO_ROOT
from kernelsweep.core.verdict import SUCCESS_CATEGORIES

# The demo's recorded fused kernel (a correct C++ kernel for L0-001): the session's other
# studies build the same candidate, so it compiles once (tests/conftest.py, study_build_cache).
KERNEL = (REPO_ROOT / "src/kernelsweep/demo_tasks/recorded/sources/fused.py").read_text()
PLAIN = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features, scale, cap):
        super().__init__()
        self.scale = scale
        self.cap = cap
        self.offset = nn.Parameter(torch.linspace(-0.5, 0.5, features))

    def forward(self, x, residual):
        return torch.clamp(torch.relu(x * self.scale + residual + self.offset), max=self.cap)
'''
TASK = "L0-001"

pytestmark = pytest.mark.slow


def fenced(code):
    return f"Here it is.\n```python\n{code}```\n"


def write_replay(folder: Path):
    folder.mkdir(parents=True)
    records = {
        "zero_shot": [{"turn": 0, "raw_response": fenced(KERNEL)}],
        # turn 0 is plain PyTorch (correct, no kernel), turn 1 the kernel
        "iterative": [{"turn": 0, "raw_response": fenced(PLAIN)}, {"turn": 1, "raw_response": fenced(KERNEL)}],
        # agentic: roles answer in words; turn 0's two candidates: no code, the kernel; turn 1: a syntax error
        "agentic": [
            {"turn": 0, "role": "analyzer", "raw_response": "PLAN: fuse the chain.\nQUERY: fuse elementwise chain\n"},
            {"turn": 0, "role": "researcher", "raw_response": "- One pass over memory [fusion.md#1]"},
            {"turn": 0, "cand": 0, "raw_response": "I would write a kernel here."},
            {"turn": 0, "cand": 1, "raw_response": fenced(KERNEL)},
            {"turn": 0, "role": "feedback", "raw_response": "DIAGNOSIS: fine.\nDIRECTIVE: keep it."},
            {"turn": 1, "cand": 0, "raw_response": fenced("class ModelNew(:\n")},
            {"turn": 1, "cand": 1, "raw_response": fenced(PLAIN)},
        ],
    }
    for method, rows in records.items():
        with open(folder / f"{method}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps({"task": TASK, **row}) + "\n")


def study_config(tmp: Path, build_cache: Path) -> Path:
    write_replay(tmp / "replay")
    config = {
        "results": str(tmp / "results"),
        "build_cache": str(build_cache),
        "device": "cpu",
        "tasks": {"source": "demo", "levels": [0], "ids": [1]},
        "models": {"recorded": {"backend": "replay", "path": str(tmp / "replay")}},
        "methods": {
            "zero_shot": {"strategy": "zero_shot"},
            "iterative": {"strategy": "iterative", "turns": 2, "goal": "none"},
            # goal none: turn 1 runs however fast turn 0's kernel timed on a loaded machine
            "agentic": {"strategy": "agentic", "turns": 2, "n": 2, "goal": "none"},
        },
        "evaluation": {"trials": 2, "timing_trials": 10, "warmup": 2, "timeout_s": 120, "compile_timeout_s": 300},
        "baseline": {"modes": ["eager"], "timing_trials": 10},
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake(config: Path, *args, check=True, python=sys.executable):
    # Each study gets its own working directory (its own .snakemake metadata and locks).
    cmd = [python, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(config.parent),
           "--cores", "2", "--configfile", str(config), *args]
    proc = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    if check:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc


def planned(proc) -> dict[str, int]:
    if "Nothing to be done" in proc.stdout + proc.stderr:
        return {}
    table = (proc.stdout + proc.stderr).split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE) if m.group(1) != "total"}


def start_and_kill_after_first_evaluation(config: Path) -> list[Path]:
    """Start the study and SIGKILL Snakemake's whole process group as soon as the first
    eval.json is written (no clean shutdown: jobs die mid-write). The eval.json files
    that existed at the kill are returned."""
    tmp = config.parent
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp),
           "--cores", "2", "--configfile", str(config)]
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    evals = tmp / "results" / "runs"
    deadline = time.time() + 900
    try:
        while time.time() < deadline and not list(evals.rglob("eval.json")) and proc.poll() is None:
            time.sleep(1)
        found = list(evals.rglob("eval.json"))
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # the run ended on its own (it failed before any evaluation)
        proc.wait()
    return found


class Study(NamedTuple):
    """The shared study: its folder, its config, and the evaluations its killed first run had written."""

    tmp: Path
    config: Path
    evals_at_kill: list[Path]


@pytest.fixture(scope="module")
def finished_study(tmp_path_factory, study_build_cache) -> Study:
    """The study run to the end the way an interrupted study is: started, killed
    after its first evaluation, unlocked, and resumed by the same command."""
    tmp = tmp_path_factory.mktemp("study")
    config = study_config(tmp, study_build_cache)
    evals_at_kill = start_and_kill_after_first_evaluation(config)
    snakemake(config, "--unlock")  # a killed Snakemake leaves its lock behind
    snakemake(config)  # resumes (the default profile reruns incomplete jobs)
    return Study(tmp, config, evals_at_kill)


def final(tmp, method):
    return json.loads((tmp / "results" / "runs" / "fp32" / "recorded" / method / TASK / "s0" / "final.json").read_text())


def test_killed_run_resumes(finished_study):
    """The shared study's first run was SIGKILLed after its first evaluation; the
    fixture unlocked it and ran the same command again, which finished it."""
    tmp, config, _ = finished_study
    assert finished_study.evals_at_kill, "the run produced no evaluation before the kill"
    for method in ("zero_shot", "iterative", "agentic"):
        assert final(tmp, method)["status"] == "evaluated"
    assert planned(snakemake(config, "-n")) == {}


def test_every_cell_has_its_final_verdict(finished_study):
    tmp, _, _ = finished_study
    zero = final(tmp, "zero_shot")
    assert zero["status"] == "evaluated" and zero["result"]["custom_kernel"] and zero["result"]["correct"]
    # Any success category: on a loaded CI machine the timing may be too spread for a verdict.
    assert zero["result"]["category"] in SUCCESS_CATEGORIES

    iterative = final(tmp, "iterative")
    assert iterative["best"] == {"turn": 1, "cand": 0}  # the kernel beats the plain rewrite
    assert iterative["candidates_evaluated"] == 2 and iterative["turns_run"] == 2
    t0 = json.loads((tmp / "results/runs/fp32/recorded/iterative" / TASK / "s0/t0/c0/eval.json").read_text())
    assert t0["category"] == "no_custom_kernel" and t0["correct"]

    agentic = final(tmp, "agentic")
    assert agentic["best"] == {"turn": 0, "cand": 1}  # a later broken turn never displaces it
    assert agentic["llm_calls"] == 5  # analyzer, researcher, two generator batches, one feedback
    runs = tmp / "results/runs/fp32/recorded/agentic" / TASK / "s0"
    categories = [json.loads((runs / f"t{t}/c{c}/eval.json").read_text())["category"] for t in (0, 1) for c in (0, 1)]
    assert categories[0] == "no_code" and categories[2] == "syntax_error" and categories[3] == "no_custom_kernel"
    prompt = json.loads((runs / "t1/prompt.json").read_text())
    text = prompt["messages"][-1]["content"]
    assert "DIRECTIVE: keep it." in text and "fuse the chain" in text and "demo_chain_fused" in text

    report = (tmp / "results/report/REPORT.md").read_text()
    assert "zero_shot" in report and "agentic" in report


def test_second_run_does_nothing(finished_study):
    _, config, _ = finished_study
    assert planned(snakemake(config, "-n")) == {}
    # ...also when Snakemake runs under another path to the same interpreter
    # (`python` vs `python3`): no job may depend on how Snakemake was started.
    here = Path(sys.executable)
    other = next(p for p in (here.with_name("python3"), here.with_name("python"),
                             here.with_name(f"python{sys.version_info[0]}.{sys.version_info[1]}"))
                 if p.exists() and p.name != here.name)
    assert planned(snakemake(config, "-n", python=str(other))) == {}


def test_deleting_one_eval_reruns_only_its_dependents(finished_study):
    tmp, config, _ = finished_study
    target = tmp / "results/runs/fp32/recorded/iterative" / TASK / "s0/t1/c0/eval.json"
    target.unlink()
    jobs = planned(snakemake(config, "-n"))
    assert jobs == {"evaluate_n1": 1, "final": 1, "report": 1, "all": 1}, jobs
    snakemake(config)
    assert target.exists()
    assert planned(snakemake(config, "-n")) == {}


def test_study_throughput_counts_every_evaluation(finished_study, tmp_path):
    tmp, _, _ = finished_study
    out = tmp_path / "throughput.json"
    proc = subprocess.run([sys.executable, str(REPO_ROOT / "benchmarks/study_throughput.py"), str(tmp / "results"),
                           "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    evals = list((tmp / "results" / "runs").rglob("eval.json"))
    report = json.loads(out.read_text())
    totals = report["totals"]
    assert totals["candidates"] == len(evals) == 7 and totals["per_hour"] > 0
    assert "per hour" in proc.stdout
    # The per-task device jobs are accounted beside the evaluations: every baseline the study ran,
    # with the seconds it held the timing slot (taken late, as evaluations take it).
    baselines = list((tmp / "results" / "baseline").rglob("*.json"))
    assert baselines and report["task_jobs"]["baseline"]["jobs"] == len(baselines)
    for row in report["task_jobs"]["baseline"]["rows"]:
        assert 0 < row["held_s"] <= row["wall_s"], row
    assert set(totals["device_s"]) == {"evaluations", "profile", "baseline"}
    # Whether a study built anything at all is said beside its rate (the published replay built nothing).
    records = [json.loads(p.read_text()) for p in (tmp / "results" / "runs").rglob("build.json")]
    built = [r for r in records if r.get("builds") or (r.get("ahead") or {}).get("builds")]  # at import, or ahead
    assert totals["built"] == len(built) >= 1  # the recorded zero-shot kernel compiles its extension


def test_study_throughput_over_calls(finished_study, tmp_path):
    """A run made in several calls (the GPU notes' slices): the span is the sum of the
    calls' walls, not the clock from the first evaluation to the last."""
    tmp, _, _ = finished_study
    script = [sys.executable, str(REPO_ROOT / "benchmarks/study_throughput.py"), str(tmp / "results")]
    wall_log = tmp_path / "wall.log"
    wall_log.write_text("1000 1400 rc=124\n\n5000 5200 rc=0\n")
    out = tmp_path / "throughput.json"
    proc = subprocess.run(script + ["--calls", str(wall_log), "--out", str(out)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    totals = json.loads(out.read_text())["totals"]
    assert (totals["span_s"], totals["calls"]) == (600.0, 2)
    assert totals["per_hour"] == round(3600 * totals["candidates"] / 600)
    assert "the sum of 2 calls' walls" in proc.stdout
    wall_log.write_text("1000 1400 rc=124\n5000\n")
    proc = subprocess.run(script + ["--calls", str(wall_log)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "wall.log:2: expected 'START END'" in proc.stderr
