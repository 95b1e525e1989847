"""The `tasks:` block of the pipeline config, parsed once and checked strictly
(a typo in a study config must fail loudly, not select different tasks).

    tasks:
      source: demo | hub | local     # required
      path: ../shared/kernelbench    # local: the checkout (required);
                                     # hub: optional folder of parquet files (no Hub, no cache)
      repo: ScalingIntelligence/KernelBench   # hub only (this default)
      revision: null                 # hub only: branch, tag or commit (default main)
      cache_dir: null                # hub only: HF cache folder (default: HF_HUB_CACHE)
      levels: [1, 2, 3]              # hub: required; local: default all level<N>/ folders;
                                     # demo: [0] (the only demo level)
      ids: "1-10"                    # "all" (default), an int, a list of ints,
                                     # or a string of ids and inclusive ranges "1-5,8"
      names: null                    # optional regex, searched in the problem name
                                     # (e.g. "Conv|GELU"; names look like 19_ReLU)
      scale: 1.0                     # every task's size constants times this (0 < scale <= 4;
                                     # kernelsweep.core.shapes.scaled), before profile, baseline, evaluate

Relative paths resolve against the repository root; `$VARS` and `~` expand.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from kernelsweep.tasks.demo import DEMO_LEVEL, DemoSource
from kernelsweep.tasks.errors import TaskConfigError
from kernelsweep.tasks.hub import DEFAULT_REPO, HubSource
from kernelsweep.tasks.ids import ALL, parse_ids
from kernelsweep.tasks.local import LocalSource

SOURCES = ("demo", "hub", "local")
KEYS = {"source", "path", "repo", "revision", "cache_dir", "levels", "ids", "names", "scale"}
MAX_SCALE = 4.0
HUB_ONLY = ("repo", "revision", "cache_dir")


@dataclass(frozen=True)
class Selection:
    source: str
    levels: tuple[int, ...] | None  # None: every level the source has (local only)
    ids: tuple[int, ...] | str      # sorted ids, or "all"
    names: re.Pattern | None
    path: Path | None = None
    repo: str = DEFAULT_REPO
    revision: str | None = None
    cache_dir: Path | None = None
    scale: float = 1.0  # the tasks' size constants times this (kernelsweep.core.shapes.scaled)

    def make_source(self) -> DemoSource | HubSource | LocalSource:
        if self.source == "demo":
            return DemoSource()
        if self.source == "local":
            return LocalSource(self.path)
        return HubSource(self.repo, self.revision, self.path, self.cache_dir)

    def matches(self, level: int, problem_id: int, name: str) -> bool:
        return (
            (self.levels is None or level in self.levels)
            and (self.ids == ALL or problem_id in self.ids)
            and (self.names is None or self.names.search(name) is not None)
        )


def parse_selection(config: Mapping[str, Any] | None, repo_root: str | os.PathLike = ".") -> Selection:
    if not isinstance(config, Mapping):
        raise TaskConfigError(f"the tasks config must be a mapping with at least `source`, got {config!r}")
    unknown = sorted(set(config) - KEYS)
    if unknown:
        raise TaskConfigError(f"tasks: unknown key(s) {unknown}; known keys: {sorted(KEYS)}")
    source = config.get("source")
    if source not in SOURCES:
        raise TaskConfigError(f"tasks.source must be one of {', '.join(SOURCES)}, got {source!r}")

    if source != "hub":
        given = [k for k in HUB_ONLY if config.get(k) is not None]
        if given:
            raise TaskConfigError(f"tasks: {given} only apply to source hub (source is {source})")
    path = _resolve_path(config.get("path"), repo_root)
    if source == "local" and path is None:
        raise TaskConfigError("tasks.path is required for source local (the KernelBench checkout)")
    if source == "demo" and path is not None:
        raise TaskConfigError("tasks.path does not apply to source demo (the demo tasks ship with kernelsweep)")

    levels = _parse_levels(config.get("levels"), source)
    names = _parse_names(config.get("names"))
    ids = parse_ids(config.get("ids"))
    repo = config.get("repo") or DEFAULT_REPO
    if not isinstance(repo, str) or repo.count("/") != 1:
        raise TaskConfigError(f"tasks.repo must look like owner/name, got {repo!r}")
    revision = config.get("revision")
    if revision is not None and not isinstance(revision, str):
        raise TaskConfigError(f"tasks.revision must be a branch, tag or commit string, got {revision!r}")
    scale = config.get("scale", 1.0)
    if scale is None:
        scale = 1.0
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale <= MAX_SCALE:
        raise TaskConfigError(f"tasks.scale must be a number in (0, {MAX_SCALE:g}], got {scale!r}")
    return Selection(
        source=source, levels=levels, ids=ids if ids == ALL else tuple(ids), names=names,
        path=path, repo=repo, revision=revision,
        cache_dir=_resolve_path(config.get("cache_dir"), repo_root), scale=float(scale),
    )


def _resolve_path(value: Any, repo_root: str | os.PathLike) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise TaskConfigError(f"tasks: a path must be a non-empty string, got {value!r}")
    path = Path(os.path.expanduser(os.path.expandvars(str(value))))
    return path if path.is_absolute() else Path(repo_root) / path


def _parse_levels(value: Any, source: str) -> tuple[int, ...] | None:
    if value is None:
        if source == "hub":
            raise TaskConfigError("tasks.levels is required for source hub, e.g. [1, 2, 3]")
        return (DEMO_LEVEL,) if source == "demo" else None
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items or any(isinstance(x, bool) or not isinstance(x, int) or x < 0 for x in items):
        raise TaskConfigError(f"tasks.levels must be a non-empty list of level numbers, got {value!r}")
    levels = tuple(sorted(set(items)))
    if source == "demo" and levels != (DEMO_LEVEL,):
        raise TaskConfigError(f"demo tasks are all level {DEMO_LEVEL}; drop tasks.levels or set it to [0]")
    if source != "demo" and DEMO_LEVEL in levels:
        raise TaskConfigError("level 0 is the demo tasks' level; use source demo for them")
    return levels


def _parse_names(value: Any) -> re.Pattern | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise TaskConfigError(f"tasks.names must be a regular expression string, got {value!r}")
    try:
        return re.compile(value)
    except re.error as e:
        raise TaskConfigError(f"tasks.names is not a valid regular expression ({e}): {value!r}") from None
