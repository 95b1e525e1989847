"""The one way a child process starts, and loads task or candidate code: the
evaluator's workers, the task check (tasks/check_child.py) and the profiler
(profiling/child.py) all start with `child_argv` and load with `load_module`.

Standard library only at import time, so a child can use it before torch is
imported and the parent without importing torch at all."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path

# Where this kernelsweep lives (.../src or site-packages): first on a child's
# sys.path, so a child imports this same kernelsweep, installed or not.
PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])

PRECISIONS = ("fp32", "fp16", "bf16")
DTYPE_NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}  # precision -> torch dtype name

# What a KernelBench-format task module defines.
TASK_NAMES = ("Model", "get_inputs", "get_init_inputs")


def child_argv(module: str) -> list[str]:
    """The command that runs `module` as __main__ in a child: isolated mode
    (no cwd, no PYTHONPATH, no user site on sys.path, so nothing planted in a
    directory, or a reference's neighbour file, can shadow a module), with
    this kernelsweep first on sys.path."""
    boot = (f"import sys; sys.path.insert(0, {PACKAGE_ROOT!r}); import runpy; "
            f"runpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return [sys.executable, "-I", "-c", boot]


def load_module(path: str | os.PathLike, name: str, *, register: bool,
                constants: dict[str, int] | None = None) -> types.ModuleType:
    """Execute a Python file as a module. A candidate is registered in
    sys.modules (some code needs that, e.g. dataclasses and pickling); a
    reference is not, so a candidate cannot find it by name. `constants`:
    a task's module-level size constants replaced before it runs (a shape
    variant, kernelsweep.core.shapes)."""
    spec = importlib.util.spec_from_file_location(name, str(path))
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    if register:
        sys.modules[name] = module
    if constants:
        from kernelsweep.core import shapes

        source = shapes.substitute(Path(path).read_text(encoding="utf-8"), constants)
        exec(compile(source, str(path), "exec"), module.__dict__)  # noqa: S102
        return module
    spec.loader.exec_module(module)
    return module


def missing_task_names(module: types.ModuleType) -> list[str]:
    return [n for n in TASK_NAMES if not hasattr(module, n)]
