"""Candidates per hour through the workflow: reads a study's results folder
after a Snakemake run (the CPU demo, the published replay on a GPU, any study)
and prints, per candidate, its build and evaluation seconds and the seconds it
held the timing slot (the GPU, or the CPU slot of a `device: cpu` study), then
how many candidates the run built and evaluated per hour: from the first build
or evaluation to the last evaluation's end, so builds count, the model's
generation before the first build does not.

    python benchmarks/study_throughput.py results            # the demo's results
    python benchmarks/study_throughput.py /tmp/ks_pub/results --out throughput.json
    python benchmarks/study_throughput.py RESULTS --since EPOCH   # one call of a resumed run:
        # only the candidates it evaluated, over the time from EPOCH (its start)
    python benchmarks/study_throughput.py RESULTS --calls wall.log   # a run made in several calls
        # (scripts/gpu_replay_published.sh's slices): every candidate, over the sum of the calls'
        # walls, so the time between calls (a fresh machine starting) does not count
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path


def candidates(results: Path) -> list[dict]:
    """One row per evaluated candidate: its cell, category, seconds, and when it ran."""
    rows = []
    for path in sorted((results / "runs").rglob("eval.json")):
        record = json.loads(path.read_text())
        run = record.get("run") or {}
        if "started" not in run:
            continue  # not through the evaluate rule (a react trajectory's own records)
        build_path = path.with_name("build.json")
        build = json.loads(build_path.read_text()) if build_path.exists() else {}
        built_at = build_path.stat().st_mtime - (build.get("wall_s") or 0.0) if build else None
        stages = record.get("stage_s") or {}
        rows.append({
            "cell": str(path.parent.relative_to(results / "runs")),
            "category": record.get("category"),
            "build_s": build.get("wall_s"),
            # compiled an extension, or tried to, at import or ahead of __init__/forward (else nothing to build)
            "built": bool(build.get("builds") or (build.get("ahead") or {}).get("builds")),
            "eval_s": record.get("wall_s"),
            "held_s": stages.get("device_held", record.get("gpu_s")),
            "start": min(t for t in (built_at, run["started"]) if t is not None),
            "evaluated": run["started"],
            "end": run["finished"],
        })
    return rows


def task_jobs(results: Path, since: float | None) -> dict[str, dict]:
    """The per-task device jobs (profiles, baselines) that ended in the span:
    how many, and their seconds (the device-held seconds where the job took the
    device late, else the profile's own wall time, else the job's wall time
    from Snakemake's benchmark, which counts its wait for the device too)."""
    kinds: dict[str, dict] = {}
    for kind in ("profile", "baseline"):
        rows = []
        for tsv in sorted((results / "benchmarks" / kind).rglob("*.tsv")):
            if since is not None and tsv.stat().st_mtime < since:
                continue
            lines = tsv.read_text().splitlines()
            wall = float(lines[1].split("\t")[0]) if len(lines) > 1 else None
            held = None
            parts = tsv.relative_to(results / "benchmarks" / kind).with_suffix("").parts  # device, precision, task
            record = results / kind / Path(*parts).with_suffix(".json")
            if record.exists():  # a profile before the late claim: its child's wall time
                data = json.loads(record.read_text())
                held = (data.get("stage_s") or {}).get("device_held", data.get("wall_s"))
            rows.append({"task": "/".join(parts), "wall_s": wall, "held_s": held if held is not None else wall})
        kinds[kind] = {"jobs": len(rows), "held_s": round(sum(r["held_s"] or 0 for r in rows), 1),
                       "wall_s": spread([r["wall_s"] for r in rows]), "rows": rows}
    return kinds


def call_walls(wall_log: Path) -> list[float]:
    """The walls of the calls a run was made in: one "START END ..." line
    (epoch seconds) per call, as scripts/gpu_replay_published.sh appends them."""
    walls = []
    for n, line in enumerate(wall_log.read_text().splitlines(), 1):
        fields = line.split()
        if not fields:
            continue
        try:
            start, end = float(fields[0]), float(fields[1])
        except (IndexError, ValueError):
            raise SystemExit(f"{wall_log}:{n}: expected 'START END' epoch seconds, got {line!r}") from None
        if end < start:
            raise SystemExit(f"{wall_log}:{n}: the call ends before it starts ({line!r})")
        walls.append(end - start)
    if not walls:
        raise SystemExit(f"{wall_log}: no calls recorded")
    return walls


def spread(values: list[float]) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "n/a"
    return f"median {statistics.median(values):.1f} s (min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path, help="the study's results folder")
    parser.add_argument("--since", type=float, help="only candidates evaluated after this epoch time, "
                                                    "and the span from it")
    parser.add_argument("--calls", type=Path, metavar="WALL_LOG",
                        help="a run made in several calls: the span is the sum of their walls "
                             "(one 'START END' line each)")
    parser.add_argument("--out", type=Path, help="also write the rows and totals as JSON")
    args = parser.parse_args()
    if args.calls and args.since is not None:
        parser.error("--calls counts the whole run; --since one call of it: give one")
    rows = [r for r in candidates(args.results) if args.since is None or r["evaluated"] >= args.since]
    if not rows:
        print(f"no evaluations under {args.results / 'runs'}", file=sys.stderr)
        return 1
    for r in rows:
        held = "-" if r["held_s"] is None else f"{r['held_s']:.1f}"
        build = "-" if r["build_s"] is None else f"{r['build_s']:.1f}"
        print(f"{r['cell']:60s} {r['category'] or '?':20s} build {build:>6s} s  eval {r['eval_s'] or 0:6.1f} s  "
              f"held {held:>6s} s")
    walls = call_walls(args.calls) if args.calls else []
    if walls:
        span, over = sum(walls), f"the sum of {len(walls)} calls' walls"
    else:
        start = args.since if args.since is not None else min(r["start"] for r in rows)
        span = max(r["end"] for r in rows) - start
        over = ("its start" if args.since is not None else "first build or evaluation") + " to last evaluation"
    totals = {"candidates": len(rows), "span_s": round(span, 1),
              "per_hour": round(3600 * len(rows) / max(span, 1e-9)),
              "build": spread([r["build_s"] for r in rows]), "eval": spread([r["eval_s"] for r in rows]),
              "held": spread([r["held_s"] for r in rows]), "built": sum(r["built"] for r in rows)}
    if walls:
        totals["calls"] = len(walls)
    print(f"\n{totals['candidates']} candidates in {span:.0f} s ({over}): {totals['per_hour']} per hour")
    print(f"build: {totals['build']}; {totals['built']} of {len(rows)} candidates compiled an extension or tried to")
    print(f"evaluation: {totals['eval']}\nslot held: {totals['held']}")
    held = sum(r["held_s"] or 0 for r in rows)
    jobs = task_jobs(args.results, args.since)
    totals["device_s"] = {"evaluations": round(held, 1), **{k: v["held_s"] for k, v in jobs.items()}}
    print(f"device held in the span: evaluations {held:.0f} s over {len(rows)}; " + "; ".join(
        f"{kind}s {v['held_s']:.0f} s over {v['jobs']} (job wall {v['wall_s']})" for kind, v in jobs.items()))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "totals": totals, "task_jobs": jobs}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
