"""The trace of one react trajectory: JSON lines, one record per event, appended
and fsynced as it happens, so a kill loses at most the record being written.
Written by the agent (kernelsweep.agent), read by the report (kernelsweep.report.react):
a file format both import, so neither imports the other for it.

Record kinds (docs/react.md has the fields): start, model, tool, guard, end."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterator

SCHEMA = "kernelsweep/trace/1"
KINDS = ("start", "model", "tool", "guard", "end")


class TraceError(ValueError):
    """A trace that cannot be resumed (wrong schema, a record in the middle is broken)."""


def load(path: Path) -> list[dict[str, Any]]:
    """The records of a trace. A torn last line (a kill mid-write) is dropped;
    a broken line anywhere else is an error: the trace was edited or corrupted."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").split("\n")
    records = []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            if all(not rest.strip() for rest in lines[i + 1:]):
                break  # the last line, cut short by a kill
            raise TraceError(f"{path}:{i + 1}: not a JSON record") from None
        if record.get("kind") not in KINDS:
            raise TraceError(f"{path}:{i + 1}: unknown record kind {record.get('kind')!r}")
        records.append(record)
    if records and records[0].get("schema") != SCHEMA:
        raise TraceError(f"{path}: first record is not a {SCHEMA} start record")
    return records


class TraceWriter:
    """Appends records; each is on disk (fsync) before the call returns."""

    def __init__(self, path: Path, records: list[dict[str, Any]]):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._truncate_torn_tail(len(records))
        self.seq = len(records)

    def _truncate_torn_tail(self, kept: int) -> None:
        # Rewrite without a torn last line, so the next append starts on a fresh line.
        if not self.path.exists():
            return
        lines = [ln for ln in self.path.read_text(encoding="utf-8").split("\n") if ln.strip()]
        if len(lines) != kept:
            good = "".join(ln + "\n" for ln in lines[:kept])
            self.path.write_text(good, encoding="utf-8")

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        record = {"seq": self.seq, "time": round(time.time(), 3), **record}
        line = json.dumps(record, separators=(",", ":"), allow_nan=False) + "\n"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        self.seq += 1
        return record


def of_kind(records: list[dict[str, Any]], kind: str) -> Iterator[dict[str, Any]]:
    return (r for r in records if r.get("kind") == kind)
