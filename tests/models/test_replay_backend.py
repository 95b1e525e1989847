"""The replay backend on the shared published responses."""

from __future__ import annotations

import json

import pytest
from model_helpers import MESSAGES, make_key

from kernelsweep.models import ModelSetupError, load_backend


def rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replay(path, **over):
    return load_backend("recorded", {"backend": "replay", "path": str(path), **over})


def call(b, **key):
    return b.generate(MESSAGES, n=1, temperature=0.0, top_p=1.0, max_tokens=16, seed=0, key=make_key(**key))


def test_file_returns_every_recorded_response_exactly(replay_dir):
    path = replay_dir / "iterative.jsonl"
    b = replay(path)
    for row in rows(path):
        (completion,) = call(b, task=row["task"], turn=row["turn"], method="iterative")
        assert completion.text == row["raw_response"]
        assert completion.latency_s is None and completion.seed is None  # nothing invented
    assert b.revision.startswith("sha256:") and b.model_id == "replay:iterative.jsonl"


def test_folder_picks_the_file_by_method(replay_dir):
    b = replay(replay_dir)
    guided = {r["task"]: r["raw_response"] for r in rows(replay_dir / "guided.jsonl")}
    zero = {r["task"]: r["raw_response"] for r in rows(replay_dir / "zero_shot.jsonl")}
    assert call(b, method="guided", task="L2-003")[0].text == guided["L2-003"]
    assert call(b, method="zero_shot", task="L2-003")[0].text == zero["L2-003"]
    # The spec can pin the file for a method of another name.
    pinned = replay(replay_dir, method="guided")
    assert call(pinned, method="my_guided_rerun", task="L2-003")[0].text == guided["L2-003"]


def test_missing_record_names_the_key(replay_dir):
    b = replay(replay_dir / "zero_shot.jsonl")
    with pytest.raises(ModelSetupError, match="task=L1-001 sample=0 turn=5 cand=0 role=generator"):
        call(b, turn=5)
    with pytest.raises(ModelSetupError, match="task=L9-999"):
        call(b, task="L9-999")
    with pytest.raises(ModelSetupError, match="cand=1"):
        b.generate(MESSAGES, n=2, temperature=0.7, top_p=1.0, max_tokens=16, seed=0, key=make_key())


def test_missing_method_file_lists_the_methods(replay_dir):
    with pytest.raises(ModelSetupError, match="method 'agentic'.*guided, iterative, zero_shot"):
        call(replay(replay_dir), method="agentic")


def test_records_with_candidates_and_bad_lines(tmp_path):
    good = tmp_path / "run.jsonl"
    good.write_text("\n".join(json.dumps({"task": "L0-001", "turn": 0, "cand": c, "raw_response": f"r{c}"})
                              for c in range(2)) + "\n")
    b = replay(good)
    out = b.generate(MESSAGES, n=2, temperature=0.7, top_p=1.0, max_tokens=8, seed=0, key=make_key(task="L0-001"))
    assert [c.text for c in out] == ["r0", "r1"] and [c.meta["replay"]["line"] for c in out] == [1, 2]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "L0-001", "turn": 0}\n')
    with pytest.raises(ModelSetupError, match="bad.jsonl:1: not a replay record"):
        call(replay(bad), task="L0-001")
    with pytest.raises(ModelSetupError, match="replay path not found"):
        replay(tmp_path / "absent.jsonl")


def test_a_relative_path_is_found_from_another_folder(tmp_path, monkeypatch):
    """The demo config names its recordings relative to the repository; a run in
    another folder (snakemake -s, a SLURM job) gets that path made absolute."""
    from kernelsweep.study.matrix import REPO_ROOT, load_study

    config = {"device": "cpu", "tasks": {"source": "demo"}, "methods": {"zero_shot": {"strategy": "zero_shot"}},
              "models": {"rec": {"backend": "replay", "path": "src/kernelsweep/demo_tasks/recorded"}}}
    monkeypatch.chdir(tmp_path)
    path = load_study(config, REPO_ROOT).config["models"]["rec"]["path"]
    assert path == str(REPO_ROOT / "src" / "kernelsweep" / "demo_tasks" / "recorded")
    (tmp_path / "mine").mkdir()  # one in the working folder is taken from there
    config["models"]["rec"]["path"] = "mine"
    assert load_study(config, REPO_ROOT).config["models"]["rec"]["path"] == str(tmp_path / "mine")
