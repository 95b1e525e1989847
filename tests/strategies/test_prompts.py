"""Prompts of every strategy and role, built from real task, profile and
evaluation files: each method's flags decide exactly which sections appear."""

import json
from pathlib import Path

import pytest

from kernelsweep.core.fileio import sha256_text, write_json
from kernelsweep.stages.select import select
from kernelsweep.prompting.strategies import build_prompt, retrieval_queries
from kernelsweep.study import layout
from kernelsweep.study.matrix import STRATEGY_DEFAULTS, resolve_method

DEMO = Path(__file__).resolve().parents[2] / "src" / "kernelsweep" / "demo_tasks"


@pytest.fixture(scope="module")
def task_file(tmp_path_factory):
    root = tmp_path_factory.mktemp("task")
    source = sorted(DEMO.glob("3_*.py"))[0]
    code = source.read_text()
    path = root / "L0-003.json"
    write_json(path, {"id": "L0-003", "level": 0, "name": source.stem, "code": code, "sha256": sha256_text(code)})
    return path, source


@pytest.fixture(scope="module")
def profile_file(task_file, tmp_path_factory):
    from kernelsweep.profiling import profile_reference

    record = profile_reference(task_file[1], "cpu", timeout_s=120)
    assert record["status"] == "ok", record
    path = tmp_path_factory.mktemp("profile") / "profile.json"
    write_json(path, record)
    return path


def spec(strategy, role="generator", device="cpu", precision="fp32", **flags):
    return {"role": role, "key": {"model": "m", "method": strategy, "task": "L0-003", "sample": "0", "turn": "0"},
            "method": resolve_method(strategy, {"strategy": strategy, **flags}),
            "model": {"backend": "replay", "path": "x", "max_tokens": 64, "temperature": 0.0},
            "device": device, "precision": precision, "corpus": None}


def user_text(record):
    return record["messages"][-1]["content"]


def test_zero_shot_has_task_and_example_only(task_file):
    record = build_prompt(spec("zero_shot"), {"task": str(task_file[0])})
    text = user_text(record)
    assert "class Model" in text and "ModelNew" in text
    assert "cpp_sources" in text and "at::parallel_for" in text  # the CPU example
    assert "Ground rules" not in text and "profile of the reference" not in text
    assert record["params"] == {"n": 1, "temperature": 0.0, "top_p": 1.0, "max_tokens": 64}
    assert record["stopped"] is False and len(record["sha256"]) == 64


def test_below_fp32_the_prompt_names_the_dtype_and_tolerance(task_file):
    fp32 = user_text(build_prompt(spec("zero_shot"), {"task": str(task_file[0])}))
    assert "evaluated in" not in fp32  # an fp32 prompt is the prompt it was before precision was an axis
    bf16 = user_text(build_prompt(spec("zero_shot", precision="bf16"), {"task": str(task_file[0])}))
    assert "evaluated in bf16" in bf16 and "`torch.bfloat16`" in bf16 and "atol = rtol = 0.01" in bf16


def test_cuda_prompt_asks_for_cuda_kernels(task_file):
    text = user_text(build_prompt(spec("zero_shot", device="cuda"), {"task": str(task_file[0])}))
    assert "__global__" in text and "cuda_sources" in text and "CUDA kernels" in text


def test_guided_adds_profile_and_competence_rule(task_file, profile_file):
    text = user_text(build_prompt(spec("guided"), {"task": str(task_file[0]), "profile": str(profile_file)}))
    assert "Ground rules" in text and "no `sources=` argument" in text
    assert "profile of the reference" in text
    assert "addmm" in text or "linear" in text or "mm" in text  # the GEMM dominates this task's profile


def test_iterative_later_turn_shows_best_code_and_report(task_file, tmp_path):
    cand = tmp_path / layout.CAND.format(precision="fp32", model="m", method="m", task="L1-001", sample=0, turn=0, cand=0)
    cand.mkdir(parents=True)
    (cand / "candidate.py").write_text("import torch\nclass ModelNew: pass  # marker-123\n")
    (cand / "eval.json").write_text(json.dumps({
        "category": "compile_error", "compiled": False, "correct": False, "custom_kernel": False, "speedup": None,
        "error": {"type": "CompileError", "message": "main.cpp:3:1: error: 'foo' was not declared in this scope"}}))
    selection = select(0, [str(cand / "eval.json")], None, "faster", last=False)
    write_json(cand.parent / "select.json", selection)
    s = spec("iterative")
    s["key"]["turn"] = "1"
    text = user_text(build_prompt(s, {"task": str(task_file[0]), "previous": str(cand.parent / "select.json")}))
    assert "marker-123" in text and "compile_error" in text and "'foo' was not declared" in text
    assert "improved, complete ModelNew" in text


def test_stopped_turn_sends_nothing(task_file, tmp_path):
    write_json(tmp_path / "select.json", {"stop": True, "stop_reason": "goal 'faster' met at turn 0", "best": None})
    record = build_prompt(spec("iterative"), {"task": str(task_file[0]), "previous": str(tmp_path / "select.json")})
    assert record["stopped"] and record["messages"] == [] and "goal" in record["stop_reason"]


def test_agentic_generator_uses_role_outputs(task_file, tmp_path):
    analysis, brief = tmp_path / "analysis.json", tmp_path / "brief.json"
    write_json(analysis, {"status": "ok", "raw_text": "PLAN: keep the GEMM, fuse bias+GELU+scale\nQUERY: fuse gelu epilogue"})
    write_json(brief, {"status": "failed", "raw_text": None, "error": "timeout"})
    record = build_prompt(spec("agentic"), {"task": str(task_file[0]), "analysis": str(analysis), "brief": str(brief)})
    text = user_text(record)
    assert "fuse bias+GELU+scale" in text and "Ground rules" in text
    assert "Notes from the documentation" not in text  # a failed role call adds nothing
    assert record["params"]["n"] == 4 and record["params"]["temperature"] == 0.7


def test_role_prompts(task_file, tmp_path):
    analyzer = build_prompt(spec("agentic", role="analyzer"), {"task": str(task_file[0])})
    assert "QUERY:" in user_text(analyzer) and analyzer["params"]["n"] == 1
    assert analyzer["params"]["temperature"] == 0.0  # roles sample at the model's temperature

    cand = tmp_path / layout.CAND.format(precision="fp32", model="m", method="m", task="L1-001", sample=0, turn=0, cand=0)
    cand.mkdir(parents=True)
    (cand / "candidate.py").write_text("class ModelNew: pass  # marker-456\n")
    (cand / "eval.json").write_text(json.dumps({"category": "wrong_output", "correct": False, "compiled": True,
                                                "custom_kernel": False, "speedup": None, "max_abs_diff": 0.5}))
    write_json(tmp_path / "select.json", select(0, [str(cand / "eval.json")], None, "faster", last=False))
    feedback = build_prompt(spec("agentic", role="feedback"), {"task": str(task_file[0]), "selection": str(tmp_path / "select.json")})
    text = user_text(feedback)
    assert "marker-456" in text and "DIRECTIVE:" in text and "0.5" in text


def test_retrieval_queries_from_analysis_or_reference():
    assert retrieval_queries("OPERATIONS: x\nQUERY: warp reduction sum\n2) QUERY: coalesced loads", "") == [
        "warp reduction sum", "coalesced loads"]
    fallback = retrieval_queries(None, "y = torch.relu(self.linear(x)); z = F.gelu(y)")
    assert "custom kernel for relu" in fallback and "custom kernel for gelu" in fallback


def test_every_strategy_preset_builds(task_file, profile_file):
    for strategy in STRATEGY_DEFAULTS:
        record = build_prompt(spec(strategy), {"task": str(task_file[0]), "profile": str(profile_file)})
        assert record["messages"][0]["role"] == "system" and record["messages"][1]["role"] == "user"


def test_role_max_tokens_caps_the_agentic_roles_only():
    from kernelsweep.prompting.strategies import sampling_params

    capped = spec("agentic", max_tokens=576, role_max_tokens=48)
    assert sampling_params(capped, "generator")["max_tokens"] == 576
    for role in ("analyzer", "researcher", "feedback"):
        assert sampling_params({**capped, "role": role}, role)["max_tokens"] == 48
    plain = spec("agentic", max_tokens=576)  # absent: the roles share the generator's cap
    assert sampling_params(plain, "analyzer")["max_tokens"] == 576
