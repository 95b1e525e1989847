"""config/replay-published.yaml (a published study's raw generations replayed
through the whole DAG on CUDA) validates and plans on a CPU machine: no model
server, no network, every stage present."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from kernelsweep.study.matrix import REPO_ROOT, load_study

CONFIG = REPO_ROOT / "config" / "replay-published.yaml"


def run(args):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=REPO_ROOT, capture_output=True, text=True,
                          env=env, timeout=600)


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}


def _shared_or_skip():
    shared = os.environ.get("KERNELSWEEP_SHARED")
    default = REPO_ROOT.parent / "shared"
    if not (default / "kernelbench").is_dir() or not (default / "replay" / "kernelbench-agentic").is_dir():
        pytest.skip(f"the config reads ../shared (KernelBench and the replay set), not found at {default}"
                    + (f" (KERNELSWEEP_SHARED={shared} is not used by the config's relative paths)" if shared else ""))


def test_config_validates_with_replay_source_per_method():
    config = yaml.safe_load(CONFIG.read_text())
    _shared_or_skip()
    study = load_study(config)
    assert study.config["device"] == "cuda"
    assert study.config["models"]["qwen7b"]["backend"] == "replay"
    assert len(study.task_ids) == 30 and study.task_ids[0] == "L1-001" and study.task_ids[-1] == "L3-010"
    replay = REPO_ROOT / config["models"]["qwen7b"]["path"]
    for method, flags in study.config["methods"].items():
        assert (replay / f"{method}.jsonl").is_file(), method  # the backend picks the file by method
    # iterative replays every recorded turn, in order: no early stop
    assert study.config["methods"]["iterative"]["turns"] == 3
    assert study.config["methods"]["iterative"]["goal"] == "none"
    # max-autotune is left out to fit one GPU (its autotuning compiles for minutes per task)
    assert set(study.config["baseline"]["modes"]) == {"eager", "inductor-default", "inductor-reduce-overhead"}


def test_dry_run_plans_the_whole_dag(tmp_path):
    _shared_or_skip()
    proc = run(["-n", "--configfile", str(CONFIG), "--config", f"results={tmp_path}/results"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    assert counts["tasks"] == 30 and counts["reference_source"] == 30
    assert counts["profile"] == 30 and counts["baseline"] == 30
    # 30 tasks x (zero_shot 1 + guided 1 + iterative 3 turns) recorded responses
    assert counts["generate_n1"] == counts["compile_n1"] == counts["evaluate_n1"] == 150
    assert counts["final"] == 90 and counts["report"] == 1 and counts["study_manifest"] == 1
    assert "prepare_model" not in counts  # no model to prepare, no server


def test_shared_material_elsewhere_is_named_on_the_command_line(tmp_path):
    """The README's override: nested --config keys merge into the config file's."""
    _shared_or_skip()
    shared = (REPO_ROOT.parent / "shared").resolve()
    proc = run(["-n", "-p", "--configfile", str(CONFIG), "--config", f"results={tmp_path}/results",
                f"tasks={{path: {shared}/kernelbench}}",
                f"models={{qwen7b: {{path: {shared}/replay/kernelbench-agentic}}}}"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert job_counts(proc.stdout)["evaluate_n1"] == 150
    assert f"--path {shared}/kernelbench" in proc.stdout or str(shared / "kernelbench") in proc.stdout


@pytest.mark.slow
def test_published_verdicts_reach_the_report_through_the_dag(tmp_path, study_build_cache):
    """A replay source with published verdicts, run through the real DAG on the CPU
    (the bundled demo task; a C++ kernel and plain PyTorch): REPORT.md compares them
    and gives the kernel's fraction of the roofline bound."""
    import json

    from test_study_run import KERNEL, PLAIN, TASK, fenced

    replay = tmp_path / "replay"
    replay.mkdir()
    records = {
        # the study called the kernel wrong, and the plain rewrite correct and faster (a tie)
        "guided": [{"turn": 0, "raw_response": fenced(KERNEL), "final": True,
                    "study_verdict": {"compiled": True, "correct": False, "speedup": None, "category": "wrong_output"}}],
        "iterative": [{"turn": 0, "raw_response": fenced(PLAIN), "final": True,
                       "study_verdict": {"compiled": True, "correct": True, "speedup": 1.004, "category": "correct"}},
                      {"turn": 1, "raw_response": fenced(PLAIN), "final": False,
                       "study_verdict": {"compiled": True, "correct": True, "speedup": 0.99, "category": "slow"}}],
    }
    for method, rows in records.items():
        (replay / f"{method}.jsonl").write_text("".join(json.dumps({"task": TASK, **r}) + "\n" for r in rows))
    config = {
        "results": str(tmp_path / "results"), "device": "cpu", "build_cache": str(study_build_cache),
        "tasks": {"source": "demo", "levels": [0], "ids": [1]},
        "models": {"recorded": {"backend": "replay", "path": "replay"}},  # relative: the run's folder
        "methods": {"guided": {"strategy": "guided"}, "iterative": {"strategy": "iterative", "turns": 2, "goal": "none"}},
        "evaluation": {"trials": 2, "timing_trials": 10, "warmup": 2, "timeout_s": 120, "compile_timeout_s": 300},
        "baseline": {"modes": ["eager"], "timing_trials": 10},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory",
                           str(tmp_path), "--cores", "2", "--configfile", str(path)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = (tmp_path / "results/report/REPORT.md").read_text()
    section = report.split("## Published vs re-measured: disagreements per cell", 1)[1].split("\n## ", 1)[0]
    assert "| guided " in section and "published wrong_output, here correct (correct_" in section
    assert "| iterative " in section and "correct, but no custom kernel (plain PyTorch)" in section
    light = report.split("## Speed of light", 1)[1].split("\n## ", 1)[0]
    assert "| guided " in light and "t0/c0 (final)" in light and "estimate" in light
