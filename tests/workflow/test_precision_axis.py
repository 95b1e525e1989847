"""Precision as a study axis, planned by Snakemake itself (`-n`, a real
subprocess): every cell, evaluation, profile and baseline once per precision,
each job told its cell's precision; results from before precision was a path
part stop the plan with the command that moves them."""

import json
import re
import subprocess
import sys
from pathlib import Path

import yaml
from test_dryrun import job_counts

from kernelsweep.study.matrix import REPO_ROOT

TASKS = [1, 2]


def study(tmp: Path, precision) -> Path:
    (tmp / "replay").mkdir(parents=True, exist_ok=True)
    config = {
        "results": str(tmp / "results"), "device": "cpu", "precision": precision,
        "tasks": {"source": "demo", "levels": [0], "ids": TASKS},
        "models": {"recorded": {"backend": "replay", "path": str(tmp / "replay")}},
        "methods": {"zero_shot": {"strategy": "zero_shot"}, "guided": {"strategy": "guided"},
                    "iterative": {"strategy": "iterative", "turns": 2},
                    "agentic": {"strategy": "agentic", "turns": 2, "n": 2},
                    "react": {"strategy": "react", "max_steps": 2}},
        "evaluation": {"trials": 2, "timing_trials": 10, "warmup": 2},
        "baseline": {"modes": ["eager"], "timing_trials": 10},
    }
    path = tmp / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def plan(config: Path, *args):
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(config.parent),
           "--configfile", str(config), "-n", "-p", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)


def test_two_precisions_plan_every_job_per_precision(tmp_path):
    one = job_counts(plan(study(tmp_path / "one", "fp32")).stdout)
    proc = plan(study(tmp_path / "two", ["fp32", "bf16"]))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    two = job_counts(proc.stdout)
    for rule in ("generate_n1", "generate_n2", "compile_n1", "compile_n2", "evaluate_n1", "evaluate_n2", "final", "react",
                 "analyze", "research", "feedback", "baseline", "profile"):
        assert two[rule] == 2 * one[rule] > 0, (rule, one, two)
    for rule in ("tasks", "reference_source", "study_manifest", "report"):  # shared by both precisions
        assert two[rule] == one[rule], (rule, one, two)
    results = tmp_path / "two/results"
    lines = proc.stdout.splitlines()
    for precision in ("fp32", "bf16"):
        # each timed job runs at its cell's precision, on its precision's reference profile and baseline
        evaluations = [line for line in lines if "kernelsweep evaluate-turn" in line and f"/runs/{precision}/" in line]
        assert len(evaluations) == (two["evaluate_n1"] + two["evaluate_n2"]) // 2
        assert all(f"--precision {precision} " in line for line in evaluations)
        for stage in ("profile", "baseline"):
            assert f"{results}/{stage}/cpu/{precision}/L0-001.json" in proc.stdout
        reacts = [line for line in lines if "kernelsweep react --spec" in line and f"/runs/{precision}/" in line]
        assert len(reacts) == two["react"] // 2
        assert all(json.loads(re.search(r"--spec '([^']+)'", line)[1])["precision"] == precision for line in reacts)
    prompts = [line for line in lines if "kernelsweep prompt --spec" in line and "/runs/bf16/recorded/guided/" in line]
    spec = json.loads(re.search(r"--spec '([^']+)'", prompts[0])[1])
    assert spec["precision"] == "bf16" and spec["key"]["precision"] == "bf16"
    assert f"{results}/profile/cpu/bf16/L0-00" in prompts[0]  # guided reads its precision's profile
    figures = [f"report/figures/speedup_cdf-{p}.svg" for p in ("fp32", "bf16")]
    assert all(f in proc.stdout for f in figures)


def test_results_from_before_precision_was_a_path_part_stop_the_plan(tmp_path):
    config = study(tmp_path, "fp32")
    old = tmp_path / "results/runs/recorded/zero_shot/L0-001/s0/t0/c0"
    old.mkdir(parents=True)
    (old / "eval.json").write_text(json.dumps({"category": "correct_tie", "precision": "fp32"}))
    proc = plan(config)
    assert proc.returncode != 0
    output = proc.stdout + proc.stderr
    assert "kernelsweep relayout --results" in output and "recomputed" in output and "Traceback" not in output
    moved = subprocess.run([sys.executable, "-m", "kernelsweep", "relayout", "--results", str(tmp_path / "results")],
                           capture_output=True, text=True, timeout=120)
    assert moved.returncode == 0, moved.stderr
    assert (tmp_path / "results/runs/fp32/recorded/zero_shot/L0-001/s0/t0/c0/eval.json").is_file()
    assert plan(config).returncode == 0
