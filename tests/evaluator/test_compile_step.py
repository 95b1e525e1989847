"""The compile step classifies build failures exactly as the evaluation does,
without running anything it does not need to."""

from __future__ import annotations

import pytest
from evaluator_paths import CPU

from kernelsweep.evaluator import compile_candidate


@pytest.mark.parametrize("candidate, expected", [
    ("cpp_bad_header", "hallucinated_api"),
    ("cpp_undeclared", "hallucinated_api"),
    ("cpp_compile_error", "compile_error"),
])
def test_build_failures_match_the_evaluation(run_eval, build_dir, tmp_path, candidate, expected):
    record = compile_candidate(CPU / f"{candidate}.py", device="cpu", build_dir=build_dir, timeout_s=600,
                               log_dir=tmp_path)
    assert record["category"] == expected and record["compiled"] is False
    assert record["error"]["message"] and record["log"]
    assert run_eval("add", candidate)["category"] == record["category"]


def test_nothing_to_build(build_dir):
    record = compile_candidate(CPU / "pytorch_only.py", device="cpu", build_dir=build_dir)
    assert record["compiled"] is None and record["category"] is None and record["builds"] == []
    assert compile_candidate(CPU / "empty.py", device="cpu", build_dir=build_dir)["category"] == "no_code"
    assert compile_candidate(CPU / "syntax_error.py", device="cpu", build_dir=build_dir)["category"] == "syntax_error"


def test_import_problems_are_left_to_the_evaluation(build_dir, tmp_path):
    record = compile_candidate(CPU / "hallucinated_kwarg.py", device="cpu", build_dir=build_dir, log_dir=tmp_path)
    assert record["category"] is None
    assert record["deferred"]["category"] == "hallucinated_api"


def test_library_build_is_recorded(cpu_library):
    build = cpu_library["builds"][0]
    assert build["ok"] and build["name"] == "ks_fixture_lib" and len(build["key"]) == 64
    assert cpu_library["candidate_sha256"] and cpu_library["wall_s"] >= cpu_library["compile_s"] >= 0
