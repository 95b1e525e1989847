"""The Hugging Face source against a real HF cache written by the test: the
offline paths (HF_HUB_OFFLINE=1, and a refused connection to a Hub endpoint on
127.0.0.1) go through huggingface_hub's own snapshot resolution."""

from __future__ import annotations

import json
import socket

import pytest

from tasks_helpers import COMMIT, reference, run_cli, write_hub_cache, write_split
from kernelsweep.core.fileio import sha256_text
from kernelsweep.tasks import TaskSourceError, plan_task_ids
from kernelsweep.tasks.hub import HubSource, find_split_files

LEVEL1 = [(1, "1_Relu_Scale.py", reference(2)), (2, "2_Relu_Triple", reference(3)), (3, "3_Conv_Thing", reference(4))]
LEVEL2 = [(1, "1_Conv_Relu", reference(5))]
LEVEL10 = [(1, "1_Not_Level_One", reference(6))]


@pytest.fixture
def cache(tmp_path):
    cache_dir = tmp_path / "hf-cache"
    write_hub_cache(cache_dir, {1: LEVEL1, 2: LEVEL2, 10: LEVEL10})
    return cache_dir


def closed_port() -> int:
    """A 127.0.0.1 port with nothing listening: connections are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


OFFLINE = {"HF_HUB_OFFLINE": "1"}


def unreachable_hub() -> dict:
    return {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}"}


def test_plan_with_names_reads_the_cache_only(cache):
    base = {"source": "hub", "cache_dir": str(cache)}
    assert plan_task_ids({**base, "levels": [1, 2], "names": "Conv"}) == ["L1-003", "L2-001"]
    assert plan_task_ids({**base, "levels": [1]}) == ["L1-001", "L1-002", "L1-003"]
    # level_1 must not pick up level_10's rows, nor the other way round.
    assert plan_task_ids({**base, "levels": [10]}) == ["L10-001"]
    with pytest.raises(TaskSourceError, match="does not have: L1-004"):
        plan_task_ids({**base, "levels": [1], "ids": "1-4", "names": "."})


@pytest.mark.parametrize("env", [OFFLINE, "unreachable"], ids=["HF_HUB_OFFLINE", "connection-refused"])
def test_write_falls_back_to_the_cache(cache, tmp_path, env):
    env = unreachable_hub() if env == "unreachable" else env
    out = tmp_path / "results" / "tasks" / "L1-002.json"
    proc = run_cli("write", "--source", "hub", "--levels", "1,2", "--cache-dir", str(cache),
                   "--task", "L1-002", "--out", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert record["id"] == "L1-002" and record["level"] == 1 and record["problem_id"] == 2
    assert record["name"] == "2_Relu_Triple"
    assert record["code"] == reference(3)
    assert record["sha256"] == sha256_text(reference(3))
    assert record["source"] == {"kind": "hub", "location": "ScalingIntelligence/KernelBench", "revision": COMMIT}
    assert record["validation"]["forward"] == "ran"


def test_name_with_py_suffix_is_normalised(cache, tmp_path):
    out = tmp_path / "L1-001.json"
    proc = run_cli("write", "--source", "hub", "--levels", "1", "--cache-dir", str(cache),
                   "--task", "L1-001", "--out", str(out), "--no-validate", env=OFFLINE)
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert record["name"] == "1_Relu_Scale" and record["validation"] is None


def test_pinned_commit_resolves_offline(cache, tmp_path):
    out = tmp_path / "L2-001.json"
    proc = run_cli("write", "--source", "hub", "--levels", "2", "--revision", COMMIT, "--cache-dir", str(cache),
                   "--task", "L2-001", "--out", str(out), "--no-validate", env=unreachable_hub())
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["source"]["revision"] == COMMIT


def test_a_pinned_commit_in_the_cache_is_read_without_asking_the_hub(cache, tmp_path):
    """A commit never changes: its complete copy in the cache is used as is. The Hub
    endpoint is a socket that listens and never answers: no connection may reach it."""
    with socket.socket() as hub:
        hub.bind(("127.0.0.1", 0))
        hub.listen(8)
        env = {"HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{hub.getsockname()[1]}",
               "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2"}
        out = tmp_path / "L1-002.json"
        proc = run_cli("write", "--source", "hub", "--levels", "1", "--revision", COMMIT, "--cache-dir", str(cache),
                       "--task", "L1-002", "--out", str(out), "--no-validate", env=env)
        assert proc.returncode == 0, proc.stderr
        assert json.loads(out.read_text())["source"]["revision"] == COMMIT
        hub.settimeout(0)
        with pytest.raises(BlockingIOError):
            hub.accept()  # nothing connected


def test_not_cached_is_a_clear_error(tmp_path):
    out = tmp_path / "L1-001.json"
    for env in (OFFLINE, unreachable_hub()):
        proc = run_cli("write", "--source", "hub", "--levels", "1", "--cache-dir", str(tmp_path / "empty"),
                       "--task", "L1-001", "--out", str(out), env=env)
        assert proc.returncode == 2
        assert "Traceback" not in proc.stderr
        assert "no complete copy in" in proc.stderr and "kernelsweep tasks fetch --source hub --levels 1" in proc.stderr
        assert not out.exists()


def test_missing_split_and_missing_problem(cache, tmp_path):
    proc = run_cli("write", "--source", "hub", "--levels", "3", "--cache-dir", str(cache),
                   "--task", "L3-001", "--out", str(tmp_path / "x.json"), env=OFFLINE)
    assert proc.returncode == 2 and "no parquet file for split level_3" in proc.stderr
    proc = run_cli("write", "--source", "hub", "--levels", "1", "--cache-dir", str(cache),
                   "--task", "L1-007", "--out", str(tmp_path / "x.json"), env=OFFLINE)
    assert proc.returncode == 2 and "L1-007: split level_1" in proc.stderr and "has no problem 7" in proc.stderr


def test_fetch_reports_the_snapshot_offline(cache):
    proc = run_cli("fetch", "--source", "hub", "--levels", "1,2", "--cache-dir", str(cache), env=OFFLINE)
    assert proc.returncode == 0, proc.stderr
    assert COMMIT in proc.stdout
    proc = run_cli("fetch", "--source", "demo")
    assert proc.returncode == 2 and "only applies to source hub" in proc.stderr


def test_converted_branch_layout_in_a_local_folder(tmp_path):
    # refs/convert/parquet lays splits out as default/level_<N>/<shard>.parquet
    folder = tmp_path / "kb-parquet"
    write_split(folder / "default" / "level_1" / "0000.parquet", 1, LEVEL1[:2])
    write_split(folder / "default" / "level_10" / "0000.parquet", 10, LEVEL10)
    assert [p.relative_to(folder).as_posix() for p in find_split_files(folder, 1)] == ["default/level_1/0000.parquet"]
    selection = {"source": "hub", "path": str(folder), "levels": [1]}
    assert plan_task_ids(selection) == ["L1-001", "L1-002"]
    problem = HubSource(path=folder).problem(1, 2)
    assert problem.code == reference(3)
    assert problem.source == {"kind": "hub", "location": str(folder), "revision": None}


def test_bad_parquet_is_reported(tmp_path):
    folder = tmp_path / "kb"
    write_split(folder / "data" / "level_1-00000-of-00001.parquet", 1, LEVEL1, drop="code")
    with pytest.raises(TaskSourceError, match=r"missing column\(s\) \['code'\]"):
        HubSource(path=folder).problem(1, 1)
    (folder / "data" / "level_2-00000-of-00001.parquet").write_bytes(b"not parquet")
    with pytest.raises(TaskSourceError, match="cannot read .*level_2-00000-of-00001.parquet"):
        HubSource(path=folder).problem(2, 1)
    with pytest.raises(TaskSourceError, match="hub parquet folder not found"):
        HubSource(path=tmp_path / "nope").problem(1, 1)
