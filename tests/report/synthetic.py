"""Writes raw result files by the layout and fields of docs/results.md, so the
report can be tested on files it did not write itself. Timing samples are chosen
so that speedups and their intervals are known by hand (constant samples give a
degenerate interval [s, s])."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from kernelsweep.core import metrics, verdict
from kernelsweep.study import layout
from kernelsweep.core.fileio import sha256_text, write_json

DEVICE_NAME = "Synthetic Device 1"
PROVENANCE = {"device_name": DEVICE_NAME, "driver": "555.42", "torch": "2.13.0", "cuda": "13.0", "python": "3.11.9"}


def constant(value: float, n: int = 20) -> list[float]:
    return [float(value)] * n


def wobbly(value: float, n: int = 20) -> list[float]:
    """Samples spread ±10% around value: compared with themselves, a clear tie."""
    return [value * (0.9 if i % 2 else 1.1) for i in range(n)]


class ResultsWriter:
    def __init__(self, root: Path, device: str = "cpu", precision: str = "fp32"):
        self.root = Path(root)
        self.device = device
        self.precision = precision
        self.task_sha: dict[str, str] = {}

    def cell_dir(self, model: str, method: str, task: str, sample: int) -> Path:
        return self.root / layout.CELL.format(precision=self.precision, model=model, method=method, task=task,
                                              sample=sample)

    def task(self, task_id: str, level: int, name: str, degenerate: str | None = None) -> None:
        """degenerate: the reason validation found the task degenerate (None: it is not)."""
        code = f"# reference for {name}\nimport torch\nclass Model(torch.nn.Module):\n    pass\n"
        self.task_sha[task_id] = sha256_text(code)
        write_json(self.root / "tasks" / f"{task_id}.json", {
            "id": task_id, "level": level, "problem_id": int(task_id.split("-")[1]), "name": name, "code": code,
            "sha256": self.task_sha[task_id], "source": {"kind": "local", "location": "synthetic", "revision": None},
            "validation": {"device": "cpu", "forward": "ran", "skip_reason": None, "warnings": [],
                           "degenerate": degenerate is not None, "degenerate_reason": degenerate}})

    def baseline(self, task: str, modes: dict[str, Sequence[float] | str], device_name: str = DEVICE_NAME,
                 paired: dict[str, Sequence[float]] | None = None) -> None:
        """modes: samples per mode, or an error string; paired: the eager samples timed beside a mode."""
        entries = {}
        for mode, value in modes.items():
            if isinstance(value, str):
                entries[mode] = {"runtime_ms": None, "error": value}
            else:
                entries[mode] = {"runtime_ms": {**metrics.summarize(value), "samples": list(value)}, "error": None}
            if mode in (paired or {}):
                entries[mode]["paired_eager_ms"] = {**metrics.summarize(paired[mode]), "samples": list(paired[mode])}
        write_json(self.root / layout.BASELINE.format(device=self.device, precision=self.precision, task=task), {
            "task": task, "device": self.device, "device_name": device_name, "precision": self.precision,
            "modes": entries, "provenance": dict(PROVENANCE, device_name=device_name)})

    def eval_record(self, task: str, category: str, ref: Sequence[float] | None = None,
                    cand: Sequence[float] | None = None, device_name: str = DEVICE_NAME) -> dict[str, Any]:
        """An eval record as the evaluator writes it for `category`, timed when samples are given."""
        correct = category in verdict.NUMERICALLY_CORRECT
        timing = metrics.compare_timings(ref, cand) if ref and cand else \
            {"speedup": None, "speedup_ci": None, "verdict": None, "faster": None}
        return {
            "schema": "kernelsweep/eval/1", "category": category,
            "compiled": None if category == "no_code" else category not in verdict.BUILD_FAILURES,
            "correct": correct,
            "custom_kernel": category in verdict.SUCCESS_CATEGORIES or category == "cheat",
            "kernel_evidence": {"static": [], "launched": []},
            "speedup": timing["speedup"], "speedup_ci": timing["speedup_ci"],
            "timing_verdict": timing["verdict"], "faster": timing["faster"],
            "runtime_ms": {**metrics.summarize(cand), "samples": list(cand)} if cand else None,
            "ref_runtime_ms": {**metrics.summarize(ref), "samples": list(ref)} if ref else None,
            "max_abs_diff": 0.0 if correct else None, "max_rel_diff": 0.0 if correct else None,
            "trials_passed": 5 if correct else 0,
            "error": None if correct or category in verdict.SUCCESS_CATEGORIES else
            {"type": category, "message": f"synthetic {category}", "log": ""},
            "flags": ["excessive_speedup"] if category == "cheat" else [],
            "wall_s": 2.0, "compile_s": 1.0, "device": self.device, "precision": self.precision,
            "provenance": dict(PROVENANCE, device_name=device_name, task_sha256=self.task_sha.get(task),
                               candidate_sha256="0" * 64, seeds=[0], atol=1e-4, rtol=1e-4, trials=5,
                               timing_trials=len(cand or []), warmup=3, harness="synthetic", visible_devices="0",
                               equivalence_margin=metrics.EQUIVALENCE_MARGIN),
        }

    def response(self, role: str = "generator", status: str = "ok", tokens: tuple[int, int] = (100, 50),
                 latency_s: float = 1.5) -> dict[str, Any]:
        return {
            "schema": "kernelsweep/response/1", "status": status, "error": None if status == "ok" else "synthetic",
            "role": role, "model": {"name": "m1", "backend": "openai", "model_id": "synthetic/model", "revision": None},
            "request": {"messages": [{"role": "user", "content": "write a kernel"}],
                        "params": {"temperature": 0.7, "top_p": 1.0, "max_tokens": 512, "n": 1, "seed": 0}},
            "raw_text": "```python\nclass ModelNew: pass\n```", "finish_reason": "stop",
            "usage": {"prompt_tokens": tokens[0], "completion_tokens": tokens[1]} if status == "ok" else None,
            "latency_s": 0.0 if status == "stopped" else latency_s, "seed": 0,
            "extraction": {"method": "fenced", "code": "class ModelNew: pass", "blocks": 1}, "prompt_sha256": "0" * 64,
        }

    def candidate(self, model: str, method: str, task: str, sample: int, turn: int, cand: int, category: str,
                  ref: Sequence[float] | None = None, cand_samples: Sequence[float] | None = None,
                  tokens: tuple[int, int] = (100, 50), **eval_kw: Any) -> dict[str, Any]:
        folder = self.cell_dir(model, method, task, sample) / f"t{turn}" / f"c{cand}"
        record = self.eval_record(task, category, ref, cand_samples, **eval_kw)
        status = {"stopped": "stopped", "generation_failed": "failed"}.get(category, "ok")
        write_json(folder / "response.json", self.response(status=status, tokens=tokens))
        write_json(folder / "eval.json", record)
        return record

    def role(self, model: str, method: str, task: str, sample: int, file: str, role: str,
             tokens: tuple[int, int] = (200, 100), turn: int | None = None) -> None:
        """An agentic role's record (analysis.json, brief.json, t{turn}/feedback.json), holding its response."""
        folder = self.cell_dir(model, method, task, sample)
        if turn is not None:
            folder = folder / f"t{turn}"
        write_json(folder / file, {"role": role, "text": f"synthetic {role} output",
                                   "response": self.response(role=role, tokens=tokens)})

    def final(self, model: str, method: str, task: str, level: int, sample: int, status: str = "evaluated",
              best: tuple[int, int] | None = None, result: dict[str, Any] | None = None,
              turns_run: int = 1, candidates_evaluated: int = 0, llm_calls: int = 0,
              tokens: tuple[int, int] = (0, 0)) -> None:
        write_json(self.cell_dir(model, method, task, sample) / "final.json", {
            "schema": "kernelsweep/final/1", "model": model, "method": method, "task": task, "level": level,
            "sample": sample, "status": status,
            "best": None if best is None else {"turn": best[0], "cand": best[1]},
            "result": result, "turns_run": turns_run, "candidates_evaluated": candidates_evaluated,
            "llm_calls": llm_calls, "tokens": {"prompt": tokens[0], "completion": tokens[1]},
            "generation_s": 0.0, "evaluation_s": 0.0})


# --- the small study the report tests compute by hand -------------------------

MODEL = "m1"
AGENTIC = {"strategy": "agentic", "turns": 2, "n": 2, "temperature": 0.7, "analyzer": True, "researcher": True,
           "feedback": True}
SMALL_STUDY = {
    "device": "cpu", "precision": "fp32",
    "models": {MODEL: {"backend": "openai", "model": "synthetic/model"}},
    "methods": {
        "zero_shot": {"strategy": "zero_shot", "turns": 1, "n": 1},
        "agentic": AGENTIC,
        "agentic_no_rag": dict(AGENTIC, researcher=False),
        "agentic_n1": dict(AGENTIC, n=1),
    },
    "ablation_base": "agentic",
    "tasks": [{"id": "L1-001", "level": 1, "name": "1_Square_matrix_multiplication_"},
              {"id": "L1-002", "level": 1, "name": "2_Standard_matrix_multiplication_"},
              {"id": "L2-001", "level": 2, "name": "1_Conv2D_ReLU_BiasAdd"}],
    "samples": 1,
    "baseline_modes": ["eager", "inductor-default", "inductor-reduce-overhead", "inductor-max-autotune"],
    "config": {"device": "cpu", "results": "results", "samples": 1,
               "evaluation": {"equivalence_margin": metrics.EQUIVALENCE_MARGIN}},
}


def write_small_study(root: Path) -> dict[str, Any]:
    """Raw results of SMALL_STUDY (expected numbers: tests/report/test_tables.py).

    Baselines: L1-001 eager 2.0, default 1.5, reduce-overhead 1.0 (fastest), max-autotune failed;
    L1-002 none; L2-001 eager 3.0, default 1.0, reduce-overhead 3.0, max-autotune 0.8 (fastest).
    """
    w = ResultsWriter(root)
    for task in SMALL_STUDY["tasks"]:
        w.task(task["id"], task["level"], task["name"])
    w.baseline("L1-001", {"eager": constant(2.0), "inductor-default": constant(1.5),
                          "inductor-reduce-overhead": constant(1.0), "inductor-max-autotune": "autotune failed"})
    w.baseline("L2-001", {"eager": constant(3.0), "inductor-default": constant(1.0),
                          "inductor-reduce-overhead": constant(3.0), "inductor-max-autotune": constant(0.8)})

    def single(method: str, task: str, level: int, category: str, ref=None, cand=None, status="evaluated"):
        record = w.candidate(MODEL, method, task, 0, 0, 0, category, ref, cand)
        if status == "evaluated":
            w.final(MODEL, method, task, level, 0, best=(0, 0), result=record, candidates_evaluated=1,
                    llm_calls=1, tokens=(100, 50))
        else:
            w.final(MODEL, method, task, level, 0, status=status, llm_calls=1)

    # zero_shot: plain PyTorch that matches (a tie), a build failure, and a missing cell
    # whose only candidate on disk is a fast kernel that must not count.
    single("zero_shot", "L1-001", 1, "no_custom_kernel", constant(2.0), wobbly(2.0))
    single("zero_shot", "L1-002", 1, "compile_error")
    w.candidate(MODEL, "zero_shot", "L2-001", 0, 0, 0, "correct_faster", constant(3.0), constant(1.0))

    # agentic, L1-001: two turns of two candidates and all three roles; a cheat (200x)
    # is never selected, the correct 2.0x kernel of turn 1 is.
    w.role(MODEL, "agentic", "L1-001", 0, "analysis.json", "analyzer")
    w.role(MODEL, "agentic", "L1-001", 0, "brief.json", "researcher")
    w.role(MODEL, "agentic", "L1-001", 0, "feedback.json", "feedback", turn=0)
    w.candidate(MODEL, "agentic", "L1-001", 0, 0, 0, "wrong_output")
    w.candidate(MODEL, "agentic", "L1-001", 0, 0, 1, "correct_tie", wobbly(2.0), wobbly(2.0))
    best = w.candidate(MODEL, "agentic", "L1-001", 0, 1, 0, "correct_faster", constant(2.0), constant(1.0))
    w.candidate(MODEL, "agentic", "L1-001", 0, 1, 1, "cheat", constant(2.0), constant(0.01))
    w.final(MODEL, "agentic", "L1-001", 1, 0, best=(1, 0), result=best, turns_run=2, candidates_evaluated=4,
            llm_calls=7, tokens=(1000, 500))
    # agentic, L1-002: a tie in turn 0, then the stop rule fires (a 'stopped' record, no call).
    tie = w.candidate(MODEL, "agentic", "L1-002", 0, 0, 0, "correct_tie", wobbly(1.0), wobbly(1.0))
    w.candidate(MODEL, "agentic", "L1-002", 0, 0, 1, "runtime_error")
    w.candidate(MODEL, "agentic", "L1-002", 0, 1, 0, "stopped")
    w.final(MODEL, "agentic", "L1-002", 1, 0, best=(0, 0), result=tie, turns_run=1, candidates_evaluated=2,
            llm_calls=2, tokens=(200, 100))
    single("agentic", "L2-001", 2, "correct_slower", constant(3.0), constant(6.0))

    # agentic_no_rag: an 8x kernel, a cell whose model call failed, a wrong output.
    single("agentic_no_rag", "L1-001", 1, "correct_faster", constant(2.0), constant(0.25))
    w.candidate(MODEL, "agentic_no_rag", "L1-002", 0, 0, 0, "generation_failed")
    w.final(MODEL, "agentic_no_rag", "L1-002", 1, 0, status="no_candidate", llm_calls=1)
    single("agentic_no_rag", "L2-001", 2, "wrong_output")

    # agentic_n1: 2.0x, plain PyTorch, 1.5x.
    single("agentic_n1", "L1-001", 1, "correct_faster", constant(2.0), constant(1.0))
    single("agentic_n1", "L1-002", 1, "no_custom_kernel", wobbly(1.0), wobbly(1.0))
    single("agentic_n1", "L2-001", 2, "correct_faster", constant(3.0), constant(2.0))
    return SMALL_STUDY
