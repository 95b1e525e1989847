"""Task ids, the `tasks:` config and planning (no network)."""

from __future__ import annotations

import pytest

from kernelsweep.tasks import (
    TaskConfigError, TaskSourceError, format_task_id, parse_ids, parse_selection, parse_task_id, plan_task_ids,
)


def test_task_ids_round_trip():
    assert format_task_id(2, 10) == "L2-010"
    assert format_task_id(0, 3) == "L0-003"
    assert format_task_id(1, 1234) == "L1-1234"
    assert parse_task_id("L2-010") == (2, 10)
    assert parse_task_id("L1-1234") == (1, 1234)
    for bad in ("L2-10", "2-010", "L2_010", "l2-010", ""):
        with pytest.raises(TaskConfigError, match="bad task id"):
            parse_task_id(bad)


@pytest.mark.parametrize("spec, expected", [
    ("1-3", [1, 2, 3]),
    ("5", [5]),
    (" 1-3, 8 ,10-11", [1, 2, 3, 8, 10, 11]),
    ([7, 2, 2], [2, 7]),
    (["1-2", 9], [1, 2, 9]),
    (4, [4]),
    ("all", "all"),
    ("ALL", "all"),
    (None, "all"),
])
def test_parse_ids(spec, expected):
    assert parse_ids(spec) == expected


@pytest.mark.parametrize("spec, message", [
    ("3-1", "runs backwards"),
    ("1-", "cannot read"),
    ("a", "cannot read"),
    (0, "start at 1"),
    ([1.5], "not an id"),
    (True, "not an id"),
    ({"a": 1}, "not an id"),
])
def test_parse_ids_rejects(spec, message):
    with pytest.raises(TaskConfigError, match=message):
        parse_ids(spec)


@pytest.mark.parametrize("config, message", [
    ({"source": "demo", "level": [0]}, "unknown key"),
    ({"source": "github"}, "tasks.source must be one of"),
    ({}, "tasks.source must be one of"),
    ({"source": "hub", "ids": "1-3"}, "tasks.levels is required for source hub"),
    ({"source": "local"}, "tasks.path is required"),
    ({"source": "demo", "levels": [1]}, "demo tasks are all level 0"),
    ({"source": "local", "path": "x", "levels": [0, 1]}, "level 0 is the demo"),
    ({"source": "local", "path": "x", "levels": []}, "non-empty list"),
    ({"source": "local", "path": "x", "revision": "v1"}, "only apply to source hub"),
    ({"source": "hub", "levels": [1], "names": "("}, "not a valid regular expression"),
    ({"source": "hub", "levels": [1], "repo": "KernelBench"}, "owner/name"),
])
def test_bad_selection_is_a_clear_error(config, message):
    with pytest.raises(TaskConfigError, match=message):
        parse_selection(config)


def test_paths_resolve_against_repo_root(tmp_path, monkeypatch):
    monkeypatch.setenv("KS_TEST_ROOT", str(tmp_path))
    assert parse_selection({"source": "local", "path": "kb"}, tmp_path).path == tmp_path / "kb"
    assert parse_selection({"source": "local", "path": "$KS_TEST_ROOT/kb"}, "/elsewhere").path == tmp_path / "kb"


def test_hub_plan_is_levels_times_ids_without_io(tmp_path):
    # An empty cache folder: planning must not need it (nor the network).
    selection = {"source": "hub", "levels": [2, 1], "ids": "1-2,10", "cache_dir": str(tmp_path / "empty")}
    assert plan_task_ids(selection) == ["L1-001", "L1-002", "L1-010", "L2-001", "L2-002", "L2-010"]
    assert not (tmp_path / "empty").exists()


def test_hub_names_without_a_fetched_copy_says_how_to_fix(tmp_path):
    selection = {"source": "hub", "levels": [1], "names": "Conv", "cache_dir": str(tmp_path)}
    with pytest.raises(TaskSourceError, match=r"name pattern with a hub source needs a fetched copy.*kernelsweep tasks fetch"):
        plan_task_ids(selection)
    with pytest.raises(TaskSourceError, match=r"ids: all with a hub source needs a fetched copy"):
        plan_task_ids({"source": "hub", "levels": [1], "cache_dir": str(tmp_path)})


def test_demo_plan():
    assert plan_task_ids({"source": "demo"}) == ["L0-001", "L0-002", "L0-003", "L0-004"]
    assert plan_task_ids({"source": "demo", "ids": [2, 4]}) == ["L0-002", "L0-004"]
    assert plan_task_ids({"source": "demo", "names": "(?i)relu"}) == ["L0-001", "L0-004"]
    with pytest.raises(TaskSourceError, match="L0-009"):
        plan_task_ids({"source": "demo", "ids": "1,9"})
    with pytest.raises(TaskConfigError, match="matches no task"):
        plan_task_ids({"source": "demo", "names": "^NoSuchTask$"})


def test_local_plan_by_level_range_list_and_name(kernelbench):
    base = {"source": "local", "path": str(kernelbench)}
    assert plan_task_ids({**base, "levels": [1], "ids": "1-3"}) == ["L1-001", "L1-002", "L1-003"]
    assert plan_task_ids({**base, "levels": [3, 1], "ids": [50, 2]}) == ["L1-002", "L1-050", "L3-002", "L3-050"]
    every = plan_task_ids({**base, "levels": [1, 2, 3]})
    assert len(every) == 250 and every[0] == "L1-001" and every[-1] == "L3-050"
    # Default levels: every level<N>/ folder of the checkout.
    assert plan_task_ids(base) == every
    # Name regex, searched in the file stem; combined with levels and ids.
    matmul = plan_task_ids({**base, "levels": [1], "names": "(?i)matmul|matrix_multiplication"})
    assert "L1-001" in matmul and "L1-019" not in matmul  # 19 is ReLU
    assert plan_task_ids({**base, "levels": [1], "ids": "1-20", "names": "^19_ReLU$"}) == ["L1-019"]


def test_local_missing_ids_are_named(kernelbench):
    with pytest.raises(TaskSourceError, match=r"does not have: L3-051, L3-060"):
        plan_task_ids({"source": "local", "path": str(kernelbench), "levels": [3], "ids": "49-51,60"})
    with pytest.raises(TaskSourceError, match=r"no level4/ folder \(levels present: \[1, 2, 3\]\)"):
        plan_task_ids({"source": "local", "path": str(kernelbench), "levels": [4]})


def test_local_checkout_errors(tmp_path):
    with pytest.raises(TaskSourceError, match="not found"):
        plan_task_ids({"source": "local", "path": str(tmp_path / "nope")})
    with pytest.raises(TaskSourceError, match="holds no level<N>/ folders"):
        plan_task_ids({"source": "local", "path": str(tmp_path)})
    level = tmp_path / "KernelBench" / "level1"  # the git repository layout
    level.mkdir(parents=True)
    (level / "1_A.py").write_text("")
    (level / "2_B.py").write_text("")
    (level / "notes.txt").write_text("")
    assert plan_task_ids({"source": "local", "path": str(tmp_path)}) == ["L1-001", "L1-002"]
    (level / "2_B_copy.py").write_text("")
    with pytest.raises(TaskSourceError, match="two files claim problem id 2"):
        plan_task_ids({"source": "local", "path": str(tmp_path)})
