"""config/replay-published.yaml (a published study's raw generations replayed
through the whole DAG on CUDA) validates and plans on a CPU machine: no model
server, no network, every stage present."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from kernelsweep.study import REPO_ROOT, load_study

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
    assert set(study.config["baseline"]["modes"]) == {"eager", "inductor-default", "inductor-reduce-overhead",
                                                      "inductor-max-autotune"}


def test_dry_run_plans_the_whole_dag(tmp_path):
    _shared_or_skip()
    proc = run(["-n", "--configfile", str(CONFIG), "--config", f"results={tmp_path}/results"])
    assert proc.returncode == 0, proc.stderr + proc.stdout
    counts = job_counts(proc.stdout)
    assert counts["tasks"] == 30 and counts["reference_source"] == 30
    assert counts["profile"] == 30 and counts["baseline"] == 30
    # 30 tasks x (zero_shot 1 + guided 1 + iterative 3 turns) recorded responses
    assert counts["generate_n1"] == counts["compile_n1"] == counts["evaluate"] == counts["select"] == 150
    assert counts["final"] == 90 and counts["report"] == 1 and counts["study_manifest"] == 1
    assert "prepare_model" not in counts  # no model to prepare, no server
