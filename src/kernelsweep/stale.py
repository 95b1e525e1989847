"""Outage records left by earlier versions are not results: retire them before
planning, so the run redoes those calls.

Before outages failed the job, a call that never got an answer was written as
a `failed` response.json, and Snakemake took the cell for finished. The
workflow calls `retire` while planning: each such record is moved (not
deleted) to {results}/stale/{UTC time}/…, the path it had under {results};
Snakemake then finds the generate job's output missing and redoes the call
and everything downstream of it. Current versions never write such a record
(kernelsweep.models.InfrastructureFailure fails the job instead), so after the
first sweep this finds nothing.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path

from kernelsweep import layout
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


def retire(results: str | os.PathLike, *, dry_run: bool = False) -> list[tuple[Path, str]]:
    """Move every outage record out of the results (see the module docstring);
    with dry_run, only report them. Returns what was (or would be) moved."""
    found = find(results)
    if dry_run or not found:
        return found
    root = Path(results)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    for path, _ in found:
        target = root / "stale" / stamp / path.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, target)
    return found
