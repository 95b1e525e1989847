"""The demo's recorded row (config/config.yaml `recorded-demo`): hand-written
responses, replayed, that give the report one candidate of each kind a study
meets. The files are the generated ones, they answer every call the demo
makes, and the real CPU evaluator gives them their intended categories."""

from __future__ import annotations

import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from kernelsweep.study.matrix import REPO_ROOT, load_study

RECORDED = REPO_ROOT / "src/kernelsweep/demo_tasks/recorded"


def test_recorded_files_are_the_generated_ones(tmp_path):
    subprocess.run([sys.executable, str(REPO_ROOT / "scripts/make_recorded_demo.py"), str(tmp_path)], check=True)
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    shipped = sorted(p.relative_to(RECORDED) for p in RECORDED.glob("*.jsonl"))
    assert made == shipped
    for rel in made:
        assert filecmp.cmp(tmp_path / rel, RECORDED / rel, shallow=False), f"{rel}: rerun scripts/make_recorded_demo.py"


def test_recorded_row_answers_every_call_of_the_demo():
    config = yaml.safe_load((REPO_ROOT / "config/config.yaml").read_text())
    entry = config["models"]["recorded-demo"]
    assert entry["backend"] == "replay" and entry["recorded"] is True
    assert (REPO_ROOT / entry["path"]).resolve() == RECORDED
    study = load_study(config, REPO_ROOT)
    for name, method in study.methods.items():
        records = [json.loads(line) for line in (RECORDED / f"{name}.jsonl").read_text().splitlines()]
        have = {(r["task"], r["turn"], r.get("cand", 0), r.get("role", "generator")) for r in records}
        for task in study.task_ids:
            if method["strategy"] == "react":
                assert (task, 0, 0, "agent") in have
                continue
            for turn in range(method["turns"]):
                for cand in range(method["n"]):
                    assert (task, turn, cand, "generator") in have, (name, task, turn, cand)
                for role in ("analyzer", "researcher"):
                    if method[role] and turn == 0:
                        assert (task, 0, 0, role) in have, (name, task, role)
                if method["feedback"] and turn < method["turns"] - 1:
                    assert (task, turn, 0, "feedback") in have, (name, task, turn)


@pytest.mark.slow
def test_recorded_responses_get_their_categories(tmp_path, study_build_cache):
    """Eight evaluations through the workflow, six builds: a faster kernel, wrong
    output, plain PyTorch, a compile error, a cheat, and iterative cells that
    go from wrong output to a correct kernel (L0-002; L0-003, a task of the demo)."""
    config = {"results": str(tmp_path / "results"), "device": "cpu", "build_cache": str(study_build_cache),
              "tasks": {"source": "demo", "levels": [0], "ids": "all"},
              "models": {"recorded-demo": {"backend": "replay", "path": str(RECORDED), "recorded": True}},
              "methods": {"zero_shot": {"strategy": "zero_shot"}, "guided": {"strategy": "guided"},
                          "iterative": {"strategy": "iterative", "turns": 2}},
              "evaluation": {"trials": 2, "timing_trials": 30, "warmup": 3}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    runs = tmp_path / "results/runs/fp32/recorded-demo"
    wanted = {
        ("zero_shot", "L0-001", 0): {"correct_faster", "correct_unstable"},  # timed on a busy machine: may be unstable
        ("zero_shot", "L0-002", 0): {"wrong_output"},
        ("zero_shot", "L0-003", 0): {"no_custom_kernel"},
        ("zero_shot", "L0-004", 0): {"compile_error"},
        ("guided", "L0-001", 0): {"cheat"},
        ("iterative", "L0-002", 0): {"wrong_output"},
        ("iterative", "L0-002", 1): {"correct_faster", "correct_tie", "correct_slower", "correct_unstable"},  # a near tie (1.02x)
        ("iterative", "L0-003", 0): {"wrong_output"},  # the GELU pass without the scale
    }
    targets = [str(runs / m / t / f"s0/t{turn}/c0/eval.json") for m, t, turn in wanted]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "study.yaml"), "--cores", "2", *targets]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    got = {key: json.loads(Path(t).read_text()) for key, t in zip(wanted, targets)}
    for key, verdict in got.items():
        assert verdict["category"] in wanted[key], (key, verdict["category"], verdict.get("error"))
    assert {"mutates_inputs", "returns_input"} <= set(got[("guided", "L0-001", 0)]["flags"])
    assert got[("iterative", "L0-002", 1)]["correct"] and got[("iterative", "L0-002", 1)]["custom_kernel"]
