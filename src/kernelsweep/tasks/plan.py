"""Which task ids a `tasks:` config selects, computed without the network:
the Snakemake DAG is built from this list before any job runs."""

from __future__ import annotations

import os
from typing import Any, Mapping

from kernelsweep.tasks.errors import TaskConfigError, TaskSourceError
from kernelsweep.tasks.ids import ALL, format_task_id
from kernelsweep.tasks.selection import Selection, parse_selection


def plan_task_ids(selection: Mapping[str, Any], repo_root: str | os.PathLike = ".") -> list[str]:
    """Task ids (`L1-001`, …) ordered by level then id.

    demo / local: the files are listed; ids the selection names but the source
    lacks are an error naming them. hub: levels × ids, with no I/O at all; only
    `ids: all` or a `names` pattern need the rows, which then come from the
    local HF cache (or `tasks.path`), never from the Hub."""
    sel = parse_selection(selection, repo_root)
    if sel.source == "hub" and sel.path is None and sel.ids != ALL and sel.names is None:
        return [format_task_id(level, pid) for level in sel.levels for pid in sel.ids]
    return [format_task_id(level, pid) for level, pid, _ in select_problems(sel)]


def select_problems(sel: Selection) -> list[tuple[int, int, str]]:
    """`(level, problem_id, name)` of every selected problem, from the source's catalog."""
    source = sel.make_source()
    levels = list(sel.levels if sel.levels is not None else source.levels)
    try:
        catalog = source.catalog(levels)
    except TaskSourceError as e:
        if sel.source == "hub" and sel.path is None:
            why = "a name pattern" if sel.names is not None else "ids: all"
            raise TaskSourceError(
                f"{why} with a hub source needs a fetched copy of the dataset to plan from, "
                f"and none is usable: {e}"
            ) from None
        raise
    if sel.ids != ALL:
        missing = [
            format_task_id(level, pid)
            for level in levels for pid in sel.ids
            if (level, pid) not in catalog
        ]
        if missing:
            raise TaskSourceError(
                f"the selection names task(s) the {sel.source} source does not have: "
                f"{_abbreviate(missing)}"
            )
    chosen = sorted((level, pid, name) for (level, pid), name in catalog.items() if sel.matches(level, pid, name))
    if not chosen:
        raise TaskConfigError(
            f"the tasks selection matches no task (source {sel.source}, levels {levels}, "
            f"ids {sel.ids if sel.ids == ALL else _abbreviate(list(map(str, sel.ids)))}, "
            f"names {sel.names.pattern if sel.names else None!r})"
        )
    return chosen


def _abbreviate(items: list[str], limit: int = 20) -> str:
    head = ", ".join(items[:limit])
    return head if len(items) <= limit else f"{head}, … ({len(items) - limit} more)"
