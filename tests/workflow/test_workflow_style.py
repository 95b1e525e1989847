"""The workflow follows Snakemake's conventions: `snakemake --lint` finds nothing,
the Snakefile and rule files are as snakefmt writes them (pyproject.toml,
[tool.snakefmt]), and .test/ holds the smallest runnable config, which plans."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kernelsweep.study.matrix import REPO_ROOT

WORKFLOW_FILES = ["Snakefile", "workflow"]


def run(*cmd: str) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def test_snakemake_lint_is_clean(tmp_path):
    proc = run(sys.executable, "-m", "snakemake", "--lint", "--config", f"results={tmp_path}/results")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "Lints for" not in output, output


def test_workflow_is_formatted_by_snakefmt():
    snakefmt = shutil.which("snakefmt", path=str(Path(sys.executable).parent)) or shutil.which("snakefmt")
    if snakefmt is None:
        pytest.skip("snakefmt is not installed (pip install -e '.[test]')")
    proc = run(snakefmt, "--check", "--diff", *WORKFLOW_FILES)
    assert proc.returncode == 0, f"run `snakefmt {' '.join(WORKFLOW_FILES)}`:\n{proc.stdout}{proc.stderr}"


def test_the_test_config_plans_the_smallest_run():
    proc = run(sys.executable, "-m", "snakemake", "-n", "--configfile", ".test/config/config.yaml")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = proc.stdout.split("Job stats:")[-1]
    counts = {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}
    # one cell, and every stage of it once
    assert counts.get("final") == 1 and counts.get("evaluate_n1") == 1 and counts.get("report") == 1, counts
