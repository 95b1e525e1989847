"""Task ids (`L{level}-{id:03d}`) and the id selections of the `tasks:` config
(`"1-10"`, `"1-5,8,20-22"`, `[1, 2, 7]`, `7`, `"all"`)."""

from __future__ import annotations

import re
from typing import Any

from kernelsweep.tasks.errors import TaskConfigError

# Task ids are L{level}-{id:03d}; the run layout's wildcard constraint is this pattern too.
# (`\d{3}\d*`, not `\d{3,}`: Snakemake reads `{3,}` in a constraint as a wildcard.)
TASK_ID = r"L(\d+)-(\d{3}\d*)"

_TASK_ID = re.compile(TASK_ID)
_RANGE = re.compile(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?")

ALL = "all"


def format_task_id(level: int, problem_id: int) -> str:
    return f"L{level}-{problem_id:03d}"


def parse_task_id(task_id: str) -> tuple[int, int]:
    """`"L2-010"` -> `(2, 10)`."""
    m = _TASK_ID.fullmatch(task_id.strip())
    if not m:
        raise TaskConfigError(f"bad task id {task_id!r}: expected L<level>-<id>, e.g. L1-001 or L0-003")
    return int(m.group(1)), int(m.group(2))


def parse_ids(spec: Any) -> list[int] | str:
    """The ids of a selection as a sorted list of distinct ints, or `"all"`.

    Accepts an int, a list of ints, or a string of comma-separated ids and
    inclusive ranges. Booleans and ids below 1 are rejected (KernelBench ids
    start at 1)."""
    if spec is None or (isinstance(spec, str) and spec.strip().lower() == ALL):
        return ALL
    if isinstance(spec, bool):
        raise TaskConfigError(f"tasks.ids: {spec!r} is not an id, a list or a range string")
    if isinstance(spec, int):
        ids = [spec]
    elif isinstance(spec, (list, tuple)):
        ids = []
        for item in spec:
            if isinstance(item, bool) or not isinstance(item, (int, str)):
                raise TaskConfigError(f"tasks.ids: list item {item!r} is not an id")
            ids.extend([item] if isinstance(item, int) else _parse_range_string(str(item)))
    elif isinstance(spec, str):
        ids = _parse_range_string(spec)
    else:
        raise TaskConfigError(f"tasks.ids: {spec!r} is not an id, a list or a range string")
    bad = [i for i in ids if i < 1]
    if bad:
        raise TaskConfigError(f"tasks.ids: ids start at 1, got {bad}")
    return sorted(set(ids))


def _parse_range_string(text: str) -> list[int]:
    ids: list[int] = []
    for part in text.split(","):
        m = _RANGE.fullmatch(part)
        if not m:
            raise TaskConfigError(
                f"tasks.ids: cannot read {part.strip()!r} in {text!r}; "
                "use ids and inclusive ranges like \"1-10,15\", a list of ints, or \"all\""
            )
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise TaskConfigError(f"tasks.ids: range {part.strip()!r} runs backwards")
        ids.extend(range(lo, hi + 1))
    return ids
