"""Results written before precision became a path part (runs/{model}/…,
profile/{device}/{task}.json, baseline/{device}/{task}.json) are not where the
workflow looks now, so it would recompute them. The workflow stops instead
(`legacy_note`), and `kernelsweep relayout` moves them, on request, to where
the run layout (kernelsweep.study.layout) puts them for the precision they were
evaluated at: read from their records, or given with --precision. Nothing is
recomputed and nothing is deleted; logs and benchmarks stay where they are.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from kernelsweep.study import layout
from kernelsweep.runtime.taskcode import PRECISIONS

_PER_DEVICE = ("profile", "baseline")  # the first part of layout.PROFILE and layout.BASELINE


def legacy_paths(results: str | os.PathLike) -> list[Path]:
    """Old-layout folders under runs/ (a model's, not a precision's) and
    profile or baseline files directly in their device folder."""
    results = Path(results)
    runs = results / layout.RUNS
    found = sorted(p for p in runs.iterdir() if p.is_dir() and p.name not in PRECISIONS) if runs.is_dir() else []
    for stage in _PER_DEVICE:
        root = results / stage
        for device in sorted(root.iterdir()) if root.is_dir() else []:
            found += sorted(p for p in device.glob("*.json") if p.is_file()) if device.is_dir() else []
    return found


def recorded_precisions(paths: list[Path]) -> set[str]:
    """The `precision` fields of the records among or under `paths` (eval.json, profile, baseline)."""
    files = [p for path in paths for p in ([path] if path.is_file() else path.rglob(layout.EVAL))]
    found = set()
    for path in files:
        try:
            value = json.loads(path.read_text(encoding="utf-8")).get("precision")
        except (OSError, ValueError, AttributeError):
            continue
        if value in PRECISIONS:
            found.add(value)
    return found


def target(results: Path, path: Path, precision: str) -> Path:
    """Where an old-layout path belongs at `precision` (the precision folder inserted)."""
    relative = path.relative_to(results)
    if relative.parts[0] == layout.RUNS:
        return results / layout.RUNS / precision / Path(*relative.parts[1:])
    stage, device, name = relative.parts
    template = layout.PROFILE if stage == "profile" else layout.BASELINE
    return results / template.format(device=device, precision=precision, task=Path(name).stem)


def moves(results: str | os.PathLike, precision: str | None = None) -> list[tuple[Path, Path]]:
    """(from, to) for every old-layout path. Raises ValueError when the precision is
    not known (no record names one and none is given), ambiguous, or a target exists."""
    results = Path(results)
    paths = legacy_paths(results)
    if not paths:  # already in the current layout (or empty): nothing to move, whatever the precision
        return []
    recorded = recorded_precisions(paths)
    if precision is None:
        if len(recorded) != 1:
            said = f"their records name {', '.join(sorted(recorded))}" if recorded else "no record names one"
            raise ValueError(f"cannot tell the precision of the results in {results} ({said}); "
                             f"pass --precision ({', '.join(PRECISIONS)})")
        (precision,) = recorded
    elif recorded - {precision}:
        raise ValueError(f"--precision {precision}, but records in {results} name {', '.join(sorted(recorded))}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    planned = [(path, target(results, path, precision)) for path in paths]
    taken = [str(dst) for _, dst in planned if dst.exists()]
    if taken:
        raise ValueError(f"already there, nothing moved: {', '.join(taken[:5])}")
    return planned


def legacy_note(results: str | os.PathLike) -> str:
    """Why the workflow stops on old-layout results, and the one command that moves them."""
    paths = legacy_paths(results)
    shown = ", ".join(str(p) for p in paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return (f"kernelsweep: {shown}: results from before precision was a path part of every cell, profile and "
            f"baseline ({layout.CELL}). Planned as they are, they would be recomputed, not found. Move them "
            f"(nothing is recomputed or deleted): kernelsweep relayout --results {results} "
            "(add --precision fp32|fp16|bf16 if asked), or give this study another `results` folder.")


def configure(parser) -> None:
    parser.add_argument("--results", required=True, help="the study's results folder")
    parser.add_argument("--precision", choices=PRECISIONS,
                        help="the precision those results were evaluated at (default: as their records say)")
    parser.add_argument("-n", "--dry-run", action="store_true", help="list the moves, do nothing")


def main(args) -> int:
    try:
        planned = moves(args.results, args.precision)
    except ValueError as error:
        print(f"kernelsweep relayout: {error}", file=sys.stderr)
        return 1
    for src, dst in planned:
        print(f"{src} -> {dst}")
        if not args.dry_run:
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.rename(src, dst)  # same file system: a rename keeps mtimes, so Snakemake sees them as done
    print(f"kernelsweep relayout: {len(planned)} path(s) {'to move' if args.dry_run else 'moved'}")
    return 0
