"""The react rule in the Snakemake workflow: a replayed trajectory on a demo task
produces the cell's final.json and t0/c0 result; a second run does nothing."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from agent_scripts import GOOD_KERNEL, block
from kernelsweep.study.matrix import REPO_ROOT

pytestmark = pytest.mark.slow


def test_react_cell_through_snakemake(tmp_path, study_build_cache):
    (tmp_path / "replay").mkdir()
    replies = [f"Action: write_file\npath: model_new.py\n{block(GOOD_KERNEL)}", "Action: submit"]
    with open(tmp_path / "replay/react_guarded.jsonl", "w") as f:
        for turn, text in enumerate(replies):
            f.write(json.dumps({"task": "L0-001", "turn": turn, "role": "agent", "raw_response": text}) + "\n")
    config = {"results": str(tmp_path / "results"), "device": "cpu", "build_cache": str(study_build_cache),
              "tasks": {"source": "demo", "levels": [0], "ids": [1]},
              "models": {"recorded": {"backend": "replay", "path": str(tmp_path / "replay")}},
              "methods": {"react_guarded": {"strategy": "react", "goal": "correct", "max_steps": 4}},
              "evaluation": {"trials": 2, "timing_trials": 5, "warmup": 1}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    cell = tmp_path / "results/runs/fp32/recorded/react_guarded/L0-001/s0"
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "Snakefile"), "--directory",
           str(tmp_path), "--configfile", str(tmp_path / "config.yaml"), "--cores", "2", str(cell / "final.json")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rule react:" in done.stderr and "rule generate" not in done.stderr
    final = json.loads((cell / "final.json").read_text())
    assert final["stop_reason"] == "goal:correct" and final["react"]["submissions"] == 1
    assert json.loads((cell / "t0/c0/eval.json").read_text())["category"] == final["result"]["category"]
    assert (cell / "react/trace.html").exists() and len(list((cell / "react/calls").glob("*.json"))) == 2
    again = subprocess.run(cmd + ["-n"], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr
