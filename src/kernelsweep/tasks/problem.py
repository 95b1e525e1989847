"""One reference problem as read from a source, before it becomes a task file."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelsweep.tasks.errors import TaskSourceError
from kernelsweep.tasks.ids import format_task_id

# KernelBench file names: `<id>_<Name>.py`, e.g. `1_Square_matrix_multiplication_.py`.
PROBLEM_FILE = re.compile(r"(\d+)_[^/]*\.py")


@dataclass(frozen=True)
class Problem:
    level: int
    problem_id: int
    name: str  # the file stem, id prefix included, as KernelBench names it
    code: str
    source: dict = field(compare=False)  # {"kind", "location", "revision"}

    @property
    def task_id(self) -> str:
        return format_task_id(self.level, self.problem_id)


def normalize_name(name: str) -> str:
    """Hub rows and file names spell the same problem with or without `.py`."""
    return name[:-3] if name.endswith(".py") else name


def scan_problem_files(folder: Path) -> dict[int, Path]:
    """`{problem_id: path}` for the `<id>_<Name>.py` files of one folder.
    Two files claiming the same id is an error: which one is the task would
    depend on directory order."""
    found: dict[int, Path] = {}
    for path in sorted(folder.iterdir()):
        m = PROBLEM_FILE.fullmatch(path.name)
        if not m or not path.is_file():
            continue
        pid = int(m.group(1))
        if pid in found:
            raise TaskSourceError(
                f"{folder}: two files claim problem id {pid}: {found[pid].name} and {path.name}"
            )
        found[pid] = path
    return found


def read_problem_file(path: Path, level: int, problem_id: int, source: dict) -> Problem:
    try:
        code = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskSourceError(f"cannot read {path}: {e}") from None
    return Problem(level, problem_id, normalize_name(path.name), code, source)
