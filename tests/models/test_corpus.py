"""The corpus readers on the real published files (CUDA-L1's H100 file, the seed
study's replay) and on small JSONL corpora, and the corpus backend's responses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelsweep.models import ModelSetupError, load_backend
from kernelsweep.models.corpus import BASELINES, CUDA_L1_TOLERANCE, CorpusError, as_response, read
from kernelsweep.prompting.extract import extract_code
from kernelsweep.study.matrix import REPO_ROOT, ConfigError, validate_config

SHARED = REPO_ROOT.parent / "shared"
H100 = SHARED / "corpora/cuda-l1/h100.jsonl"
REPLAY = SHARED / "replay/kernelbench-agentic"
MESSAGES = [{"role": "user", "content": "write ModelNew"}]


def _needs(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not found (the shared material next to the checkout)")


def _raw_h100() -> list[dict]:
    return [json.loads(line) for line in H100.read_text().splitlines() if line.strip()]


def test_cuda_l1_h100_every_row_with_its_claims():
    _needs(H100)
    raw = _raw_h100()
    rows = read(H100, "cuda-l1")
    assert len(rows) == 250
    assert sorted({r.level for r in rows.values()}) == [1, 2, 3]
    assert [sum(r.level == lv for r in rows.values()) for lv in (1, 2, 3)] == [100, 100, 50]
    for line, src in enumerate(raw, 1):
        row = rows[f"L{src['level_id']}-{src['task_id']:03d}"]
        assert row.where == f"h100.jsonl:{line}"
        assert row.claims == {"eager": src["score_default"],
                              "torch.compile-default": src["score_torch_compile_default"],
                              "torch.compile-reduce-overhead": src["score_torch_compile_reduce_overhead"],
                              "cuda-graph": src["score_cuda_graph"], "cudnn-benchmark": src["score_cudnn"]}
        assert (row.atol, row.rtol) == (CUDA_L1_TOLERANCE, CUDA_L1_TOLERANCE) == (1e-2, 1e-2)
        assert row.code == src["custom_code"] and row.ref_code == src["ref_code"]
    first = rows["L1-001"]
    assert first.claims["eager"] == 2.75 and first.claims["torch.compile-reduce-overhead"] == 3.777


def test_cuda_l1_empty_code_is_a_no_code_candidate_and_claims_nothing():
    _needs(H100)
    rows = read(H100, "cuda-l1")
    empty = [r for r in rows.values() if not (r.code or "").strip()]
    assert len(empty) == sum(1 for src in _raw_h100() if not (src["custom_code"] or "").strip()) > 0
    backend = load_backend("cuda-l1", {"backend": "corpus", "format": "cuda-l1", "path": str(H100)})
    for row in empty:
        assert set(row.claims) == set(BASELINES) and all(v is None for v in row.claims.values())
        [completion] = backend.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=1, seed=0,
                                        key={"task": row.task, "turn": 0})
        assert completion.text == ""
        assert extract_code(completion.text).code is None  # the evaluator's no_code
        assert completion.meta["corpus"]["where"] == row.where


def test_cuda_l1_code_reaches_the_candidate_unchanged():
    _needs(H100)
    rows = read(H100, "cuda-l1")
    backend = load_backend("cuda-l1", {"backend": "corpus", "format": "cuda-l1", "path": str(H100)})
    for task, row in rows.items():
        if not (row.code or "").strip():
            continue
        [completion] = backend.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=1, seed=0,
                                        key={"task": task, "turn": 0})
        assert extract_code(completion.text).code.rstrip() == row.code.rstrip(), task
        assert completion.meta["corpus"]["claims"] == row.claims
    assert backend.revision.startswith("sha256:") and backend.model_id == "corpus:h100.jsonl"


def test_code_with_fences_inside_round_trips():
    code = 'import torch\nDOC = """```python\nx = 1\n```"""\nclass ModelNew(torch.nn.Module):\n    pass\n'
    assert extract_code(as_response(code)).code.rstrip() == code.rstrip()


def test_backend_refuses_more_than_one_candidate_and_unknown_tasks():
    _needs(H100)
    backend = load_backend("cuda-l1", {"backend": "corpus", "format": "cuda-l1", "path": str(H100)})
    with pytest.raises(ModelSetupError, match="one candidate per task"):
        backend.generate(MESSAGES, n=2, temperature=0.0, top_p=1.0, max_tokens=1, seed=0,
                         key={"task": "L1-001", "turn": 0})
    with pytest.raises(ModelSetupError, match="one candidate per task"):
        backend.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=1, seed=0,
                         key={"task": "L1-001", "turn": 1})
    with pytest.raises(ModelSetupError, match="no row for task L0-001"):
        backend.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=1, seed=0,
                         key={"task": "L0-001", "turn": 0})


def test_missing_corpus_file_and_unknown_format_are_named(tmp_path):
    with pytest.raises(ModelSetupError, match="corpus file not found"):
        load_backend("c", {"backend": "corpus", "format": "jsonl", "path": str(tmp_path / "none.jsonl")})
    with pytest.raises(ModelSetupError, match="format must be one of 'cuda-l1', 'jsonl', 'replay'"):
        load_backend("c", {"backend": "corpus", "format": "csv", "path": str(tmp_path)})
    with pytest.raises(CorpusError, match="is a folder; name one .jsonl file of it"):
        read(tmp_path, "replay")


def _jsonl(tmp_path, *rows) -> Path:
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_jsonl_claims_by_baseline_and_as_one_number(tmp_path):
    rows = read(_jsonl(tmp_path,
                       {"task": "L1-002", "code": "x", "claims": {"eager": 2, "torch.compile-default": 1.5}, "atol": 1e-3},
                       {"level": 2, "task_id": 7, "code": None, "claimed_speedup": 4.0,
                        "baseline": "torch.compile-reduce-overhead"}), "jsonl")
    assert rows["L1-002"].claims["eager"] == 2.0 and rows["L1-002"].claims["torch.compile-default"] == 1.5
    assert rows["L1-002"].claims["cuda-graph"] is None and rows["L1-002"].atol == 1e-3 and rows["L1-002"].rtol is None
    assert rows["L2-007"].claims["torch.compile-reduce-overhead"] == 4.0 and rows["L2-007"].claims["eager"] is None
    assert rows["L2-007"].code is None


@pytest.mark.parametrize("row, message", [
    ({"code": "x"}, "needs 'task'"),
    ({"task": "L1-001", "claims": {"tensorrt": 2.0}}, "unknown baseline 'tensorrt'"),
    ({"task": "L1-001", "claimed_speedup": -1}, "'claimed_speedup' must be a positive number"),
    ({"task": "L1-001", "claims": {"eager": "fast"}}, "'claims.eager' must be a positive number"),
    ({"task": "L1-001", "code": 3}, "'code' must be a string or null"),
    ({"task": "L1-001", "atol": "loose"}, "'atol' must be a number"),
])
def test_jsonl_bad_rows_are_named_with_their_line(tmp_path, row, message):
    with pytest.raises(CorpusError, match=message) as err:
        read(_jsonl(tmp_path, {"task": "L1-009", "code": "ok"}, row), "jsonl")
    assert "c.jsonl:2" in str(err.value)


def test_a_task_given_twice_is_an_error(tmp_path):
    with pytest.raises(CorpusError, match="c.jsonl:2: a second row for L1-001 \\(the first: c.jsonl:1\\)"):
        read(_jsonl(tmp_path, {"task": "L1-001", "code": "a"}, {"level": 1, "task_id": 1, "code": "b"}), "jsonl")


def test_not_json_is_named(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"task": "L1-001"}\nnot json\n')
    with pytest.raises(CorpusError, match="c.jsonl:2: not JSON"):
        read(path, "jsonl")


def test_seed_replay_as_a_corpus_takes_the_submitted_record():
    _needs(REPLAY)
    records = [json.loads(line) for line in (REPLAY / "iterative.jsonl").read_text().splitlines()]
    rows = read(REPLAY / "iterative.jsonl", "replay")
    assert len(rows) == 30
    for task, row in rows.items():
        final = [r for r in records if r["task"] == task and r.get("final") is True]
        submitted = final[-1] if final else max((r for r in records if r["task"] == task), key=lambda r: r["turn"])
        assert row.text == submitted["raw_response"] and row.code is None
        verdict = submitted["study_verdict"]
        assert row.claims["eager"] == (verdict.get("speedup") if verdict["correct"] else None)


def test_a_corpus_study_needs_one_candidate_methods():
    base = {"results": "r", "device": "cpu", "tasks": {"source": "demo", "levels": [0], "ids": "all"},
            "models": {"pub": {"backend": "corpus", "format": "jsonl", "path": "c.jsonl"}}}
    validate_config(base | {"methods": {"rows": {"strategy": "zero_shot"}}})
    with pytest.raises(ConfigError, match="config key 'methods.iter': model\\(s\\) pub read a corpus"):
        validate_config(base | {"methods": {"rows": {"strategy": "zero_shot"}, "iter": {"strategy": "iterative"}}})
    with pytest.raises(ConfigError, match="config key 'models.pub'.*format"):
        validate_config(base | {"models": {"pub": {"backend": "corpus", "path": "c.jsonl"}},
                                "methods": {"rows": {"strategy": "zero_shot"}}})


def test_a_claim_over_torch_compile_needs_that_mode_measured():
    base = {"results": "r", "device": "cpu", "tasks": {"source": "demo", "levels": [0], "ids": "all"},
            "models": {"pub": {"backend": "corpus", "format": "jsonl", "path": "c.jsonl",
                               "baseline": "torch.compile-reduce-overhead"}},
            "methods": {"rows": {"strategy": "zero_shot"}}}
    validate_config(base)  # the default modes measure every torch.compile mode
    validate_config(base | {"baseline": {"modes": ["eager", "inductor-reduce-overhead"]}})
    with pytest.raises(ConfigError, match="'models.pub.baseline': .*does not measure inductor-reduce-overhead"):
        validate_config(base | {"baseline": {"modes": ["eager", "inductor-default"]}})


def test_planning_names_tasks_the_corpus_lacks_and_unreadable_corpora(tmp_path):
    from kernelsweep.study.matrix import load_study

    corpus = _jsonl(tmp_path, {"task": "L0-001", "code": "x"}, {"task": "L0-003", "code": "y"})
    config = {"results": str(tmp_path / "r"), "device": "cpu", "tasks": {"source": "demo", "levels": [0], "ids": [1, 3]},
              "models": {"pub": {"backend": "corpus", "format": "jsonl", "path": str(corpus)}},
              "methods": {"rows": {"strategy": "zero_shot"}}}
    assert load_study(config).task_ids == ("L0-001", "L0-003")
    with pytest.raises(ConfigError, match=r"'models.pub': the corpus .*c.jsonl has no row for 2 of the study's 4 "
                                          r"tasks \(L0-002, L0-004\)"):
        load_study(config | {"tasks": {"source": "demo", "levels": [0], "ids": "all"}})
    with pytest.raises(ConfigError, match="'models.pub': c.jsonl:1: needs 'task'"):
        load_study(config | {"models": {"pub": {"backend": "corpus", "format": "jsonl",
                                                "path": str(_jsonl(tmp_path, {"code": "x"}))}}})
