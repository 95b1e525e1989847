"""Pieces of scripted model replies for the react agent's tests (importable
from the tests: pytest puts this folder on sys.path; a module named
`conftest` would be whichever conftest was imported first)."""

from __future__ import annotations

from pathlib import Path

GOOD_KERNEL = (Path(__file__).parent / "fixtures/scale_add_relu_cpu.py").read_text()


def broken(message_line: int = 1) -> str:
    """A candidate that does not parse; `message_line` moves the error to another line."""
    return "import torch\n" + "\n" * message_line + "class ModelNew(:\n    pass\n"


def block(code: str) -> str:
    return f"```python\n{code}```"
