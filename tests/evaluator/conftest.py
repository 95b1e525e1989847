"""Shared fixtures of the evaluator tests: paths, one build cache for the whole
run, shared by its workers (the C++ fixture library compiles once), and an `evaluate` preset for
the CPU target with small trial counts."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evaluator_paths import CPU, LIBRARY_CANDIDATE, REFERENCES


@pytest.fixture(scope="session")
def build_dir(shared_by_workers) -> Path:
    # KERNELSWEEP_TEST_BUILD_DIR keeps builds between runs while developing.
    kept = os.environ.get("KERNELSWEEP_TEST_BUILD_DIR")
    if kept:
        Path(kept).mkdir(parents=True, exist_ok=True)
        return Path(kept)
    return shared_by_workers("build")


@pytest.fixture(scope="session")
def cpu_library(build_dir) -> dict:
    """The compile step run once for the shared C++ library (through the API)."""
    from kernelsweep.evaluator import compile_candidate

    record = compile_candidate(LIBRARY_CANDIDATE, device="cpu", build_dir=build_dir, timeout_s=1200,
                               build_sharing="content")
    assert record["compiled"] is True, record
    return record


@pytest.fixture
def run_eval(build_dir, tmp_path):
    from kernelsweep.evaluator import evaluate

    def run(reference: str, candidate: str | Path, **overrides):
        cand = candidate if isinstance(candidate, Path) else CPU / f"{candidate}.py"
        # The fixtures are trusted: identical extensions build once ("content");
        # the poisoning tests ask for the study's default, "candidate".
        options = dict(device="cpu", trials=3, timing_trials=10, warmup=2, timeout_s=120.0,
                       compile_timeout_s=1200.0, build_dir=build_dir, log_dir=tmp_path / "logs",
                       build_sharing="content")
        options.update(overrides)
        return evaluate(REFERENCES / f"{reference}.py", cand, **options)

    return run
