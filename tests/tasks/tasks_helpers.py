"""Helpers for the tasks tests: reference sources written on the fly, the
dataset's parquet files, and a real Hugging Face cache laid out the way
huggingface_hub writes it (so `snapshot_download(local_files_only=True)`
resolves it for real)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

REPO_ROOT = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"

SMALL_REFERENCE = '''import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, k):
        super().__init__()
        self.k = k
    def forward(self, x):
        return torch.relu(x) * self.k

n = 8

def get_inputs():
    return [torch.randn(n, n)]

def get_init_inputs():
    return [{k}]
'''


def reference(k: int = 2) -> str:
    """A small valid reference; `k` makes each one distinct."""
    return SMALL_REFERENCE.replace("{k}", str(k))


def shared_dir() -> Path:
    return Path(os.environ.get("KERNELSWEEP_SHARED", REPO_ROOT.parent / "shared"))


def write_split(path: Path, level: int, rows: list[tuple[int, str, str]], *, drop: str | None = None) -> None:
    """A parquet file with the dataset's columns: code, level, name, problem_id."""
    columns = {
        "code": [code for _, _, code in rows],
        "level": [level] * len(rows),
        "name": [name for _, name, _ in rows],
        "problem_id": [pid for pid, _, _ in rows],
    }
    if drop:
        del columns[drop]
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def write_hub_cache(cache_dir: Path, splits: dict[int, list[tuple[int, str, str]]], *,
                    repo: str = "ScalingIntelligence/KernelBench", commit: str = COMMIT) -> Path:
    """The HF cache layout: blobs/<sha256>, snapshots/<commit>/data/... as
    relative symlinks to the blobs, refs/main holding the commit."""
    storage = cache_dir / f"datasets--{repo.replace('/', '--')}"
    snapshot = storage / "snapshots" / commit
    for level, rows in splits.items():
        staging = cache_dir / "staging" / f"level_{level}.parquet"
        write_split(staging, level, rows)
        data = staging.read_bytes()
        blob = storage / "blobs" / hashlib.sha256(data).hexdigest()
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(data)
        link = snapshot / "data" / f"level_{level}-00000-of-00001.parquet"
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(blob, link.parent))
    (storage / "refs").mkdir(parents=True, exist_ok=True)
    (storage / "refs" / "main").write_text(commit)
    return snapshot


def run_cli(*args: str, env: dict | None = None, cwd: Path = REPO_ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    """`kernelsweep tasks ...` as a user runs it: a real process."""
    return subprocess.run(
        [sys.executable, "-m", "kernelsweep", "tasks", *args],
        cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=timeout,
    )
