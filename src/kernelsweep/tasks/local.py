"""Tasks from a local KernelBench checkout: `<root>/level<N>/<id>_<Name>.py`
(the root may also be the git repository holding a `KernelBench/` folder)."""

from __future__ import annotations

import re
import subprocess
from functools import cached_property
from pathlib import Path

from kernelsweep.tasks.errors import TaskSourceError
from kernelsweep.tasks.ids import format_task_id
from kernelsweep.tasks.problem import Problem, read_problem_file, scan_problem_files

_LEVEL_DIR = re.compile(r"level(\d+)")


class LocalSource:
    kind = "local"

    def __init__(self, root: Path):
        self.root = root

    @cached_property
    def base(self) -> Path:
        """The folder that holds the `level<N>/` folders."""
        if not self.root.is_dir():
            raise TaskSourceError(
                f"local KernelBench checkout not found: {self.root} is not a folder (tasks.path)"
            )
        for candidate in (self.root, self.root / "KernelBench"):
            if candidate.is_dir() and _level_dirs(candidate):
                return candidate.resolve()
        raise TaskSourceError(
            f"{self.root} holds no level<N>/ folders (looked in it and in {self.root / 'KernelBench'}); "
            "tasks.path must point at a KernelBench checkout"
        )

    @cached_property
    def levels(self) -> list[int]:
        return sorted(_level_dirs(self.base))

    @cached_property
    def source_info(self) -> dict:
        return {"kind": self.kind, "location": str(self.base), "revision": _git_head(self.base)}

    def files(self, level: int) -> dict[int, Path]:
        folder = _level_dirs(self.base).get(level)
        if folder is None:
            raise TaskSourceError(
                f"{self.base} has no level{level}/ folder (levels present: {self.levels})"
            )
        return scan_problem_files(folder)

    def catalog(self, levels: list[int]) -> dict[tuple[int, int], str]:
        return {
            (level, pid): path.stem
            for level in levels
            for pid, path in self.files(level).items()
        }

    def problem(self, level: int, problem_id: int) -> Problem:
        path = self.files(level).get(problem_id)
        if path is None:
            raise TaskSourceError(
                f"{format_task_id(level, problem_id)}: no file {problem_id}_*.py in {self.base / f'level{level}'}"
            )
        return read_problem_file(path, level, problem_id, self.source_info)


def _level_dirs(folder: Path) -> dict[int, Path]:
    return {
        int(m.group(1)): p
        for p in folder.iterdir()
        if p.is_dir() and (m := _LEVEL_DIR.fullmatch(p.name))
    }


def _git_head(folder: Path) -> str | None:
    """The checkout's commit, for provenance; None when it is not a git checkout."""
    try:
        out = subprocess.run(
            ["git", "-C", str(folder), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    head = out.stdout.strip()
    return head or None
