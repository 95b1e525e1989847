"""The project's own demo tasks (src/kernelsweep/demo_tasks/), level 0: small
enough to evaluate on a CPU, so the whole pipeline runs anywhere."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import kernelsweep
from kernelsweep.tasks.errors import TaskSourceError
from kernelsweep.tasks.ids import format_task_id
from kernelsweep.tasks.problem import Problem, read_problem_file, scan_problem_files

DEMO_LEVEL = 0
DEMO_DIR = Path(kernelsweep.__file__).resolve().parent / "demo_tasks"


class DemoSource:
    kind = "demo"
    levels = [DEMO_LEVEL]

    @cached_property
    def files(self) -> dict[int, Path]:
        if not DEMO_DIR.is_dir():
            raise TaskSourceError(f"the bundled demo tasks are missing: {DEMO_DIR} (broken install?)")
        return scan_problem_files(DEMO_DIR)

    @property
    def source_info(self) -> dict:
        return {"kind": self.kind, "location": "kernelsweep/demo_tasks", "revision": kernelsweep.__version__}

    def catalog(self, levels: list[int]) -> dict[tuple[int, int], str]:
        return {(DEMO_LEVEL, pid): path.stem for pid, path in self.files.items()}

    def problem(self, level: int, problem_id: int) -> Problem:
        path = self.files.get(problem_id) if level == DEMO_LEVEL else None
        if path is None:
            raise TaskSourceError(
                f"{format_task_id(level, problem_id)}: no such demo task "
                f"(demo tasks: {', '.join(format_task_id(DEMO_LEVEL, p) for p in self.files)})"
            )
        return read_problem_file(path, level, problem_id, self.source_info)
