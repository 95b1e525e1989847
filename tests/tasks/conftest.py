"""Fixtures for the tasks tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_helpers import shared_dir


@pytest.fixture
def kernelbench() -> Path:
    """The shared KernelBench checkout (KERNELSWEEP_SHARED, default <repo>/../shared)."""
    path = shared_dir() / "kernelbench"
    if not (path / "level1").is_dir():
        pytest.skip(f"KernelBench checkout not found at {path} (set KERNELSWEEP_SHARED to the shared folder)")
    return path
