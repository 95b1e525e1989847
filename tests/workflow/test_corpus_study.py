"""A published corpus as a study input, end to end on the CPU: a small JSONL corpus
(a C++ kernel, a wrong one, one that fails at construction, an empty row) over the
bundled demo tasks goes through Snakemake to the report's claims section."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pandas as pd
import pytest
import yaml

from kernelsweep.prompting.extract import extract_code
from kernelsweep.study.matrix import REPO_ROOT

RECORDED = REPO_ROOT / "src/kernelsweep/demo_tasks/recorded/zero_shot.jsonl"
DEMO = REPO_ROOT / "src/kernelsweep/demo_tasks"

FAILS_HERE = '''import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, out_scale):
        super().__init__()
        raise RuntimeError("this kernel needs a library this machine lacks")

    def forward(self, x):
        return x
'''


def recorded_code(task: str) -> str:
    for line in RECORDED.read_text().splitlines():
        row = json.loads(line)
        if row["task"] == task:
            return extract_code(row["raw_response"]).code
    raise AssertionError(task)


def write_corpus(path):
    scale_add = (DEMO / "1_Scale_Add_ReLU_Chain.py").read_text()
    rms = (DEMO / "2_RMSNorm_Rows.py").read_text()
    rows = [
        # the recorded demo's fused C++ loop: a correct custom kernel, faster than eager on the CPU
        {"task": "L0-001", "code": recorded_code("L0-001"), "claims": {"eager": 3.0, "cuda-graph": 2.0},
         "atol": 1e-2, "rtol": 1e-2, "ref_code": scale_add},
        # the recorded demo's RMSNorm without the mean: wrong output; its reference differs from the task's
        {"task": "L0-002", "code": recorded_code("L0-002"), "claimed_speedup": 2.0,
         "ref_code": rms.replace("eps", "epsilon")},
        {"level": 0, "task_id": 3, "code": FAILS_HERE, "claims": {"eager": 1.5}},
        {"task": "L0-004", "code": "", "claims": {}},  # nothing published, nothing claimed
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_cuda_l1_config_plans_one_cell_per_row(tmp_path):
    """config/cuda-l1.yaml: CUDA-L1's 250 H100 rows, one cell each, planned on a CPU machine."""
    shared = REPO_ROOT.parent / "shared"
    if not (shared / "kernelbench").is_dir() or not (shared / "corpora/cuda-l1/h100.jsonl").is_file():
        pytest.skip(f"the config reads ../shared (KernelBench and CUDA-L1), not found at {shared}")
    proc = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile", "config/cuda-l1.yaml",
                           "--config", f"results={tmp_path}/results"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    table = proc.stdout.split("Job stats:")[-1]
    counts = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
    assert counts["generate_n1"] == counts["evaluate_n1"] == counts["final"] == 250 and counts["report"] == 1


@pytest.mark.slow
def test_corpus_rows_reach_the_claims_table(tmp_path, study_build_cache):
    corpus = tmp_path / "corpus.jsonl"
    write_corpus(corpus)
    config = {"results": str(tmp_path / "results"), "device": "cpu", "build_cache": str(study_build_cache),
              "tasks": {"source": "demo", "levels": [0], "ids": "all"},
              "models": {"published": {"backend": "corpus", "format": "jsonl", "path": str(corpus)}},
              "methods": {"rows": {"strategy": "zero_shot"}},
              "evaluation": {"trials": 2, "timing_trials": 30, "warmup": 3},
              "baseline": {"modes": ["eager"], "timing_trials": 10}}
    (tmp_path / "study.yaml").write_text(yaml.safe_dump(config))
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO_ROOT / "Snakefile"), "--directory", str(tmp_path),
           "--configfile", str(tmp_path / "study.yaml"), "--cores", "2"]
    done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]

    report = tmp_path / "results/report"
    rows = pd.read_csv(report / "tables/claims_rows.csv").set_index("task")
    assert list(rows.index) == ["L0-001", "L0-002", "L0-003", "L0-004"]
    # the fused loop is faster (confirmed) unless the busy machine made its timings too spread to tell
    assert (rows.loc["L0-001", "category"], rows.loc["L0-001", "outcome"]) in {
        ("correct_faster", "confirmed"), ("correct_unstable", "not reproducible")}
    assert rows.loc["L0-001", "claimed"] == 3.0 and rows.loc["L0-001", "claimed cuda-graph"] == 2.0
    assert rows.loc["L0-001", "reference"] == "same" and rows.loc["L0-001", "claimed_atol"] == 1e-2
    assert (rows.loc["L0-002", "category"], rows.loc["L0-002", "outcome"]) == ("wrong_output", "refuted")
    assert rows.loc["L0-002", "reference"].startswith("differs: ")
    assert (rows.loc["L0-003", "category"], rows.loc["L0-003", "outcome"]) == ("runtime_error", "not reproducible")
    assert "needs a library" in rows.loc["L0-003", "reason"]
    assert (rows.loc["L0-004", "category"], rows.loc["L0-004", "outcome"]) == ("no_code", "no claim")

    counts = pd.read_csv(report / "tables/claims.csv")
    overall = counts[counts["level"] == "all"].iloc[0]
    confirmed = int(rows.loc["L0-001", "outcome"] == "confirmed")
    assert (overall["rows"], overall["claimed"], overall["confirmed"], overall["refuted"],
            overall["not reproducible"], overall["no claim"]) == (4, 3, confirmed, 1, 2 - confirmed, 1)
    assert overall["reference differs"] == 1
    assert list(counts["level"]) == ["all", "L0"]
    text = (report / "REPORT.md").read_text()
    assert "## Published claims" in text and "## Published claims: per row" in text
    assert (report / "figures/claims.svg").is_file()
    # the response record carries the claim judged
    response = json.loads((tmp_path / "results/runs/fp32/published/rows/L0-002/s0/t0/c0/response.json").read_text())
    assert response["meta"]["corpus"]["claims"]["eager"] == 2.0
    assert response["meta"]["corpus"]["where"] == "corpus.jsonl:2"
