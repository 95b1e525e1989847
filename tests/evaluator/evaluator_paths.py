"""Paths of the evaluator's test fixtures (importable from the tests: pytest
puts this folder on sys.path)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
REFERENCES = FIXTURES / "references"
CPU = FIXTURES / "cpu"
CUDA = FIXTURES / "cuda"
LIBRARY_CANDIDATE = CPU / "cpp_add.py"  # the fixtures sharing the C++ library embed the same source


def shared_dir() -> Path:
    return Path(os.environ.get("KERNELSWEEP_SHARED", REPO.parent / "shared"))
