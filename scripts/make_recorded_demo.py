"""Writes src/kernelsweep/demo_tasks/recorded/<method>.jsonl: the demo's recorded
responses (written by hand, not by a model) for the four demo tasks (the demo
config runs L0-001 and L0-003, which between them show every family), in the
replay format (kernelsweep.models.replay), from the candidate files in
recorded/sources/ (the one copy of each) and the prose and method plan below.
Run it after editing a source or this file:
    python scripts/make_recorded_demo.py
Each source is a family a real study meets; the category each one gets on the
CPU is in src/kernelsweep/demo_tasks/recorded/README.md (and tested in
tests/workflow/test_recorded_demo.py)."""

from __future__ import annotations

import json
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "src/kernelsweep/demo_tasks/recorded"


def reply(prose: str, code: str) -> str:
    return f"{prose}\n\n```python\n{code}```\n"


T1, T2, T3, T4 = "L0-001", "L0-002", "L0-003", "L0-004"
# Each source's one-line prose before its code block.
PROSE = {
    "fused": "Fuse the five elementwise passes into one C++ loop over the rows.",
    "chain_bad": "One fused C++ loop for the whole chain.",
    "inplace": "Fuse the chain and write the result into x to avoid allocating an output.",
    "rms": "One pass per row for the sum of squares, one for the scaled output.",
    "rms_wrong": "A C++ row loop: sum of squares, then normalise and apply the gain.",
    "gemm_plain": "Fold the bias into addmm and apply GELU in place.",
    "gemm": "Keep the GEMM in BLAS and fuse GELU and the scale into one pass over its output.",
    "gemm_noscale": "Keep the GEMM in BLAS and apply GELU in one pass over its output.",
    "conv": "A direct convolution with ReLU and pooling fused, no intermediate tensors.",
    "conv_bad": "A direct convolution with ReLU and pooling fused.",
}

# method -> task -> turn -> [candidate replies]
GENERATOR = {
    "zero_shot": {T1: [["fused"]], T2: [["rms_wrong"]], T3: [["gemm_plain"]], T4: [["conv_bad"]]},
    "guided": {T1: [["inplace"]], T2: [["rms"]], T3: [["gemm"]], T4: [["conv"]]},
    "iterative": {T1: [["chain_bad"], ["fused"]], T2: [["rms_wrong"], ["rms"]], T3: [["gemm_noscale"], ["gemm"]],
                  T4: [["conv_bad"], ["conv"]]},
    # best-of-2; a cell whose turn 0 is already faster stops there (goal `faster`)
    "agentic": {T1: [["chain_bad", "fused"], ["fused", "chain_bad"]], T2: [["rms_wrong", "rms"], ["rms", "rms_wrong"]],
                T3: [["gemm_plain", "gemm"], ["gemm", "gemm_plain"]], T4: [["conv_bad", "conv"], ["conv", "conv_bad"]]},
}
ROLES = {
    "analyzer": "The forward pass is memory-bound: several elementwise passes that one fused loop can replace.",
    "researcher": "C++ extensions: read contiguous float pointers, loop over rows, write one output tensor.",
    "feedback": "Fix the reported error first; keep the fused structure; check every output element.",
}
REACT = {T1: "fused", T2: "rms", T3: "gemm", T4: "conv"}


def rows(sources: Path):
    code = {name: (sources / f"{name}.py").read_text() for name in PROSE}
    for method, tasks in GENERATOR.items():
        out = []
        for task, turns in tasks.items():
            for turn, cands in enumerate(turns):
                for cand, name in enumerate(cands):
                    out.append({"task": task, "turn": turn, "cand": cand, "raw_response": reply(PROSE[name], code[name]),
                                "finish_reason": "stop", "recorded": name})
            if method == "agentic":
                out.append({"task": task, "turn": 0, "role": "analyzer", "raw_response": ROLES["analyzer"]})
                out.append({"task": task, "turn": 0, "role": "researcher", "raw_response": ROLES["researcher"]})
                for turn in range(len(turns)):
                    out.append({"task": task, "turn": turn, "role": "feedback", "raw_response": ROLES["feedback"]})
        yield method, out
    out = []
    for task, name in REACT.items():
        out.append({"task": task, "turn": 0, "role": "agent", "recorded": name,
                    "raw_response": f"Action: submit\n```python\n{code[name]}```\n"})
        out.append({"task": task, "turn": 1, "role": "agent", "raw_response": "Action: submit\n"})
    yield "react", out


def main(out: Path = OUT) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for method, records in rows(OUT / "sources"):
        with open(out / f"{method}.jsonl", "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")


if __name__ == "__main__":
    import sys

    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
