"""Write one task file, `{results}/tasks/{task}.json` (layout: docs/results.md)."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Any, Mapping

from kernelsweep.core import shapes
from kernelsweep.core.fileio import sha256_text, write_json
from kernelsweep.tasks.errors import TaskConfigError, TaskInvalidError
from kernelsweep.tasks.ids import parse_task_id
from kernelsweep.tasks.problem import Problem
from kernelsweep.tasks.selection import Selection, parse_selection
from kernelsweep.tasks.validate import (
    DEFAULT_CPU_MEMORY_MB, DEFAULT_MAX_NUMEL, DEFAULT_TIMEOUT_S, validate_reference,
)


def load_problem(sel: Selection, task_id: str) -> Problem:
    """The selected task's reference, read from its source (for a hub source
    this is the call that may contact the Hub)."""
    level, problem_id = parse_task_id(task_id)
    if sel.levels is not None and level not in sel.levels:
        raise TaskConfigError(f"{task_id}: level {level} is not in the selection (tasks.levels {list(sel.levels)})")
    problem = sel.make_source().problem(level, problem_id)
    if not sel.matches(level, problem_id, problem.name):
        raise TaskConfigError(f"{task_id} ({problem.name}) is not in the tasks selection (ids / names)")
    return problem


def scale_problem(problem: Problem, scale: float, *, batch_only: bool = False) -> tuple[Problem, dict[str, Any] | None]:
    """The problem with its size constants (or only the batch-like ones)
    times `scale` (tasks.scale), and what changed: {factor, constants:
    {name: [original, scaled]}, original_sha256}; None at scale 1."""
    if scale == 1.0:
        return problem, None
    code, changed = shapes.scaled(problem.code, scale, batch_only=batch_only)
    return replace(problem, code=code), {"factor": scale, "constants": changed,
                                         "original_sha256": sha256_text(problem.code)}


def task_record(problem: Problem, validation: dict | None, scale: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "id": problem.task_id,
        "level": problem.level,
        "problem_id": problem.problem_id,
        "name": problem.name,
        "code": problem.code,
        "sha256": sha256_text(problem.code),
        "source": dict(problem.source),
        "validation": validation,
        "scale": scale,
    }


def materialize(selection: Mapping[str, Any], task_id: str, out_path: str | os.PathLike, *,
                repo_root: str | os.PathLike = ".", validate: bool = True, device: str = "cpu",
                forward: str = "auto", max_numel: int = DEFAULT_MAX_NUMEL,
                timeout_s: float = DEFAULT_TIMEOUT_S, cpu_memory_mb: int = DEFAULT_CPU_MEMORY_MB) -> dict[str, Any]:
    """Read, validate and write one task; return the record written.

    Raises TaskConfigError / TaskSourceError (bad selection, source missing or
    unreachable) and TaskInvalidError (the reference fails validation); nothing
    is written then."""
    sel = parse_selection(selection, repo_root)
    original = load_problem(sel, task_id)
    problem, scale = scale_problem(original, sel.scale)

    def check(p: Problem) -> dict | None:
        return validate_reference(p.code, task_id, device=device, forward=forward, max_numel=max_numel,
                                  timeout_s=timeout_s, cpu_memory_mb=cpu_memory_mb) if validate else None

    try:
        validation = check(problem)
    except TaskInvalidError as error:
        # Scaled, a size may no longer fit another (channels by groups): scale the batch alone.
        narrow, narrow_scale = scale_problem(original, sel.scale, batch_only=True) if scale else (None, None)
        if not narrow_scale or not narrow_scale["constants"] or narrow.code == problem.code:
            raise
        validation = check(narrow)
        problem, scale = narrow, dict(narrow_scale, narrowed=str(error)[:500])
    record = task_record(problem, validation, scale)
    write_json(out_path, record)
    return record
