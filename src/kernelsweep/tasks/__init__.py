"""KernelBench and demo tasks: select them from the `tasks:` config, read them
from a source (Hugging Face dataset, local checkout, bundled demo tasks),
validate each reference in a child process, and write `tasks/{task}.json`.

Public API:
    plan_task_ids(selection, repo_root=".") -> list[str]      # no network
    materialize(selection, task_id, out_path, ...) -> dict    # writes one task
    validate_reference(code, task_id, ...) -> dict            # raises TaskInvalidError
    parse_selection(selection, repo_root=".") -> Selection
    format_task_id(level, problem_id), parse_task_id(task_id)
The `tasks:` keys are documented in kernelsweep.tasks.selection.
"""

from kernelsweep.tasks.errors import TaskConfigError, TaskError, TaskInvalidError, TaskSourceError
from kernelsweep.tasks.ids import format_task_id, parse_ids, parse_task_id
from kernelsweep.tasks.materialize import load_problem, materialize, task_record
from kernelsweep.tasks.plan import plan_task_ids, select_problems
from kernelsweep.tasks.selection import Selection, parse_selection
from kernelsweep.tasks.validate import validate_reference

__all__ = [
    "TaskConfigError", "TaskError", "TaskInvalidError", "TaskSourceError",
    "Selection", "format_task_id", "load_problem", "materialize", "parse_ids",
    "parse_selection", "parse_task_id", "plan_task_ids", "select_problems",
    "task_record", "validate_reference",
]
