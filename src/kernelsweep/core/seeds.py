"""Deterministic seeds: one definition for every sampled call of the study.

A seed is a function of the cell's identity only, hashed with sha256 (Python's
`hash()` is salted per process), so rerunning one cell, in another process or
another Python version, reproduces its inputs exactly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

# Seeds fit in 31 bits: every server and library we pass them to accepts that
# (some store seeds as signed 32-bit integers).
SEED_BITS = 31
_VERSION = "kernelsweep-seed/1"  # bump only together with a note in the results docs


def derive_seed(model: str, method: str, task: str, sample: int, turn: int, cand: int,
                role: str = "generator") -> int:
    payload = json.dumps(
        [_VERSION, str(model), str(method), str(task), int(sample), int(turn), int(cand), str(role)],
        separators=(",", ":"),
    )
    digest = hashlib.sha256(payload.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") % (1 << SEED_BITS)


def seed_for(key: Mapping, cand: int) -> int:
    """`derive_seed` for a call key {model, method, task, sample, turn, role}."""
    missing = [k for k in ("model", "method", "task", "sample", "turn") if k not in key]
    if missing:
        raise KeyError(f"call key lacks {', '.join(missing)}: {dict(key)}")
    return derive_seed(key["model"], key["method"], key["task"], key["sample"], key["turn"], cand,
                       key.get("role", "generator"))


def candidate_seeds(key: Mapping, n: int, seed: int) -> list[int]:
    """Seeds of a call's n candidates when they are sampled separately:
    `seed` for candidate 0 (the call's seed), then derive_seed(..., cand=i) when
    the key names the cell, else consecutive seeds (ad-hoc calls, benchmarks)."""
    try:
        derived = [seed_for(key, i) for i in range(n)]
    except KeyError:
        derived = [(seed + i) % (1 << SEED_BITS) for i in range(n)]
    return [seed] + derived[1:]
