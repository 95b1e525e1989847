"""Outage records left by earlier versions are not results: their calls are
redone, and the records kept aside under {results}/stale/.

Before outages failed the job, a call that never got an answer was written as
a `failed` response.json, and Snakemake took the cell for finished. Planning
only reads (`find`): the job that wrote such a record is given one more input,
the record's place under {results}/stale/ (`retired_path`), which the rule
retire_outage_record makes by moving the record there (`move_aside`, nothing
is deleted). So the plan redoes the call and everything downstream of it, and a
dry run moves nothing. The moved record stays an input of its job from then on
(`retired`), so the job's set of inputs, which Snakemake compares with the last
run's, does not change again. Current versions never write such a record
(kernelsweep.models.InfrastructureFailure fails the job instead), so after the
first sweep `find` finds nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kernelsweep.study import layout
from kernelsweep.models.records import outage

FAILED = b'"failed"'  # a cheap byte test before parsing: almost every record is "ok"


def find(results: str | os.PathLike) -> list[tuple[Path, str]]:
    """(path, reason) of every response.json under {results}/runs that records an outage."""
    found = []
    for folder, _, files in os.walk(Path(results) / layout.RUNS):
        if layout.RESPONSE not in files:
            continue
        path = Path(folder, layout.RESPONSE)
        try:
            data = path.read_bytes()
            record = json.loads(data) if FAILED in data else None
        except (OSError, ValueError):
            continue  # unreadable or being replaced: not ours to judge here
        reason = outage(record) if isinstance(record, dict) else None
        if reason is not None:
            found.append((path, reason))
    return sorted(found)


def retired_path(results: str | os.PathLike, record: str | os.PathLike) -> Path:
    """Where a record under {results} is kept once moved aside: the same path under {results}/stale/."""
    return Path(results) / layout.STALE / Path(record).relative_to(results)


def retired(results: str | os.PathLike) -> set[Path]:
    """The records (their paths under {results}/runs) that were moved aside."""
    root = Path(results) / layout.STALE
    return {Path(results) / p.relative_to(root) for p in (root / layout.RUNS).rglob(layout.RESPONSE)}


def move_aside(results: str | os.PathLike, record: str | os.PathLike) -> Path:
    """Move one record to its retired_path (the workflow's retire_outage_record job)."""
    target = retired_path(results, record)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(record, target)
    return target
