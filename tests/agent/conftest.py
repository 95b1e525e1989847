"""Scripted trajectories for the react agent: a replay file of model replies
(text protocol), a demo task (L0-001) on the CPU, real evaluations with a C++
kernel, and the session's build cache so the kernel compiles once."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kernelsweep.core import react_trace as trace
from kernelsweep.study.matrix import resolve_method

REPO = Path(__file__).resolve().parents[2]
TASK_FILE = REPO / "src/kernelsweep/demo_tasks/1_Scale_Add_ReLU_Chain.py"
FAST_EVAL = {"trials": 2, "timing_trials": 5, "warmup": 1, "timeout_s": 120, "compile_timeout_s": 300,
             "equivalence_margin": 0.01, "shape_variants": 2, "tolerance": "ours"}


class Scenario:
    """One cell's files: task, replay of the model's replies, spec."""

    def __init__(self, root: Path, build: Path):
        self.root = root
        self.build = build
        src = TASK_FILE.read_text()
        self.reference = root / "L0-001.py"
        self.reference.write_text(src)
        self.task = root / "L0-001.json"
        self.task.write_text(json.dumps({"code": src, "sha256": hashlib.sha256(src.encode()).hexdigest()}))
        self.method = "react"
        self.replay = root / "replay.jsonl"

    @property
    def cell(self) -> Path:
        return self.root / f"runs/fp32/rp/{self.method}/L0-001/s0"

    def script(self, replies: list[str], first_step: int = 0) -> None:
        with open(self.replay, "w") as f:
            for i, text in enumerate(replies):
                f.write(json.dumps({"task": "L0-001", "turn": first_step + i, "role": "agent", "raw_response": text,
                                    "prompt_tokens": 100, "completion_tokens": 10}) + "\n")

    def spec(self, **flags) -> dict:
        method = resolve_method("react", {"strategy": "react", **flags})
        return {"model": "rp", "model_spec": {"backend": "replay", "path": str(self.replay)}, "method": self.method,
                "method_flags": method, "task": "L0-001", "sample": 0, "device": "cpu", "precision": "fp32",
                "evaluation": FAST_EVAL, "profile_timeout_s": 300, "corpus": None, "build_dir": str(self.build),
                "slots": {"results": str(self.root), "gpus": "cpu"}}

    def run(self, **flags) -> dict:
        from kernelsweep.agent.cell import run_cell

        return run_cell(self.spec(**flags), self.task, self.reference, self.cell, self.cell / "final.json")

    def records(self) -> list[dict]:
        return trace.load(self.cell / "react/trace.jsonl")

    def kinds(self) -> list[str]:
        """The trace as a compact sequence: model, tool:<name>, guard:<name>:<action>, end:<reason>."""
        out = []
        for r in self.records():
            if r["kind"] == "tool":
                out.append(f"tool:{r['name']}")
            elif r["kind"] == "guard":
                out.append(f"guard:{r['guard']}:{r['action']}")
            elif r["kind"] == "end":
                out.append(f"end:{r['reason']}")
            else:
                out.append(r["kind"])
        return out


@pytest.fixture
def scenario(tmp_path, study_build_cache) -> Scenario:
    # The session's study build cache (tests/conftest.py): the kernel these trajectories
    # submit compiles once for every worker and the react study.
    return Scenario(tmp_path, study_build_cache)
