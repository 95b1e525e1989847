"""`kernelsweep evaluate-turn`: a turn's candidates evaluated one after the
other, each on a claimed timing slot (`gpu-slots run --late` around
`evaluate-candidate`, as a job of its own would be), then the turn's
selection (stages/select.py). One job per turn instead of n + 1: the
workflow plans per job, and the reference study's ~2,700 evaluations were
most of its jobs (docs/decisions/2026-12-07-one-evaluation-job-per-turn.md).

Lose no result: each finished record is kept beside its eval.json as
eval.resume.json with the key of what it judged (the build, the candidate,
its response, the task's reference, the evaluation's settings) before the
next candidate starts. Snakemake removes a failed or killed job's outputs;
the rerun takes every record whose key still matches and evaluates only the
rest. A completed turn removes them, so a forced rerun measures again.

    kernelsweep evaluate-turn --builds B0 B1 ... --turn T --goal G [--previous P] [--last]
        --select OUT --slots "GPU-SLOTS ARGS" --logs DIR -- EVALUATE-CANDIDATE ARGS
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from kernelsweep.core.fileio import read_json, write_json
from kernelsweep.evaluator.errors import HarnessError
from kernelsweep.stages import evaluate, select
from kernelsweep.study import layout

RESUME = "eval.resume.json"  # in a candidate's folder, while its turn is unfinished
_PENDING = "eval.pending.json"  # what evaluate-candidate writes, before it is keyed


def resume_key(build: Path, candidate_args: list[str]) -> str:
    """What a kept record judged: the files of the candidate's folder the
    evaluation reads, the task's reference, and the evaluation's settings."""
    h = hashlib.sha256()
    candidate = layout.cand_file(build, layout.CANDIDATE)
    for path in (build, candidate, layout.cand_file(build, layout.RESPONSE), layout.reference_of(candidate)):
        h.update(path.name.encode() + b"\0")
        h.update(path.read_bytes() if path.is_file() else b"(missing)")
        h.update(b"\0")
    h.update(json.dumps(candidate_args).encode())
    return h.hexdigest()


def _kept(folder: Path, key: str) -> dict[str, Any] | None:
    try:
        kept = read_json(folder / RESUME)
    except (OSError, ValueError):
        return None
    if isinstance(kept, dict) and kept.get("key") == key and isinstance(kept.get("record"), dict):
        return kept["record"]
    return None


def _evaluate_one(build: Path, log: Path, args: argparse.Namespace) -> tuple[int, dict[str, Any] | None]:
    """(exit status, record) of one candidate: in this process where nothing
    is to run (a stopped turn, a failed model call), else in evaluate-candidate
    on a claimed slot, its output into the log."""
    folder = build.parent
    pending = folder / _PENDING
    candidate_args = [*args.candidate_args, "--build", str(build), "--out", str(pending)]
    try:
        nothing_to_run = evaluate.not_evaluated(read_json(layout.cand_file(build, layout.RESPONSE))) is not None
    except HarnessError:
        nothing_to_run = True  # an outage record: evaluate-candidate refuses it, here as in a job of its own
    if nothing_to_run:
        parser = argparse.ArgumentParser(prog="kernelsweep evaluate-candidate")
        evaluate.EvaluateCandidate.configure(parser)
        code = evaluate.EvaluateCandidate.main(parser.parse_args(candidate_args))
    else:
        log.parent.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "kernelsweep", "gpu-slots", "run", *shlex.split(args.slots), "--late", "--",
                   sys.executable, "-m", "kernelsweep", "evaluate-candidate", *candidate_args]
        with open(log, "w") as out:
            code = subprocess.call(command, stdout=out, stderr=subprocess.STDOUT)
    if code != 0:
        return code, None
    record = read_json(pending)
    pending.unlink()
    return 0, record


def run(args: argparse.Namespace) -> int:
    builds = [Path(b) for b in args.builds]
    failed = 0
    records: list[dict[str, Any] | None] = []
    for build in builds:
        key = resume_key(build, args.candidate_args)
        record = _kept(build.parent, key)
        if record is not None:
            print(f"{build.parent}: kept from an earlier run of this turn: {record.get('category')}")
        else:
            code, record = _evaluate_one(build, Path(args.logs) / f"{build.parent.name}.log", args)
            if record is None:
                print(f"{build.parent}: the evaluation failed (exit {code}); see {args.logs}", file=sys.stderr)
                failed = failed or code
            else:
                write_json(build.parent / RESUME, {"key": key, "record": record})
                print(f"{build.parent}: {record.get('category')} speedup={record.get('speedup')}")
        records.append(record)
    if failed:
        return failed  # no output: the job fails, the finished records wait for its rerun
    evals = [layout.cand_file(b, layout.EVAL) for b in builds]
    for path, record in zip(evals, records):
        write_json(path, record)
    previous = read_json(args.previous) if args.previous else None
    chosen = select.select_evaluated(args.turn, [(str(p), r) for p, r in zip(evals, records)], previous,
                                     args.goal, args.last)
    write_json(args.select, chosen)
    for build in builds:
        (build.parent / RESUME).unlink(missing_ok=True)
    best = chosen["best"]
    print(f"{args.select}: best={best and (best['turn'], best['cand'])} stop={chosen['stop']}")
    return 0


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--builds", nargs="+", required=True, help="the turn's build.json files, in candidate order")
    parser.add_argument("--turn", type=int, required=True)
    parser.add_argument("--previous", help="the previous turn's select.json")
    parser.add_argument("--goal", choices=sorted(select.GOALS), default="faster")
    parser.add_argument("--last", action="store_true", help="this is the method's last turn")
    parser.add_argument("--select", required=True, help="where the turn's select.json goes")
    parser.add_argument("--slots", required=True, help="the arguments of `kernelsweep gpu-slots run` (one string)")
    parser.add_argument("--logs", required=True, help="a folder: each candidate's evaluation log, c<k>.log")
    parser.add_argument("candidate_args", nargs=argparse.REMAINDER,
                        help="after --: evaluate-candidate's settings (not --build, --out)")


def main(args: argparse.Namespace) -> int:
    if args.candidate_args[:1] == ["--"]:
        args.candidate_args = args.candidate_args[1:]
    return run(args)

