"""A react evaluation builds its candidate before it claims the timing slot, so a
build never holds the device (or, on the CPU, the single timing slot)."""

from __future__ import annotations

import contextlib

import kernelsweep.evaluator as evaluator
from kernelsweep.agent import tools
from kernelsweep.agent.workspace import Workspace


def test_build_happens_before_the_slot_is_claimed(tmp_path, monkeypatch):
    events: list[str] = []

    @contextlib.contextmanager
    def slot(ctx):
        events.append("claim")
        yield
        events.append("release")

    def build(candidate, **kwargs):
        events.append("build")
        assert kwargs["build_dir"] == tmp_path / "build"
        return {"compiled": True}

    def evaluate(reference, candidate, **kwargs):
        events.append("evaluate")
        assert kwargs["build_dir"] == tmp_path / "build"  # where the build went: found cached
        return {"category": "correct_faster"}

    monkeypatch.setattr(tools, "device_slot", slot)
    monkeypatch.setattr(evaluator, "compile_candidate", build)
    monkeypatch.setattr(evaluator, "evaluate", evaluate)
    evaluation = {"trials": 1, "timing_trials": 2, "warmup": 0, "timeout_s": 10, "compile_timeout_s": 10,
                  "equivalence_margin": 0.01, "shape_variants": 0, "tolerance": "ours"}
    ctx = tools.Context(workspace=Workspace(tmp_path / "ws"), reference=tmp_path / "ref.py",
                        attempts_dir=tmp_path / "attempts", device="cpu", precision="fp32", evaluation=evaluation,
                        profile_timeout_s=10, build_dir=tmp_path / "build", flags={}, corpus=None,
                        slots={"results": str(tmp_path), "gpus": "cpu"})
    result = tools.Toolbox(ctx)._evaluate_file(tmp_path / "attempts/a001", "class ModelNew: pass\n")
    assert result["category"] == "correct_faster"
    assert events == ["build", "claim", "evaluate", "release"]
