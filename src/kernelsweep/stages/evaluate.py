"""The compile and evaluate stages of the study: thin wrappers around
kernelsweep.evaluator that (1) turn a stopped turn or a failed model call into a
record without running anything, and (2) link every evaluation to the
generation and prompt it came from.

    kernelsweep compile-turn --candidates C0 C1 ... --device D --build-dir B
    kernelsweep evaluate-candidate --build B --out E ...
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from kernelsweep.study import layout
from kernelsweep.evaluator.settings import TOLERANCE_PROFILES, EvalSettings
from kernelsweep.core.fileio import read_json, sha256_file, write_json
from kernelsweep.models.records import outage

_DEFAULTS = EvalSettings()


def cell_of(candidate: Path) -> dict[str, Any]:
    """{model, method, task, sample, turn, cand} of a candidate's file."""
    return layout.key_of(candidate).as_dict()


def not_evaluated(response: dict[str, Any]) -> dict[str, Any] | None:
    """The record for a candidate that must not run: a stopped turn or a call
    the server refused. A record of an outage (written before outages failed
    the job) is no verdict's input: HarnessError, the job fails."""
    from kernelsweep.evaluator import HarnessError

    status = response.get("status")
    if status == "stopped":
        return {"category": "stopped", "error": None}
    reason = outage(response)
    if reason is not None:
        raise HarnessError(f"the response records an outage, not the model's answer ({reason}); rerun the "
                           "workflow: it moves such records aside and makes the call again")
    if status != "ok":
        return {"category": "generation_failed",
                "error": {"type": "GenerationFailed", "message": str(response.get("error") or "model call failed"), "log": None}}
    return None


def _placeholder(kind: dict[str, Any]) -> dict[str, Any]:
    from kernelsweep.evaluator import record

    return {**record.blank(), **kind}


def _tolerance(args) -> dict[str, Any]:
    from kernelsweep.evaluator import record

    return record.tolerance(EvalSettings(precision=args.precision or _DEFAULTS.precision,
                                         tolerance=args.tolerance or _DEFAULTS.tolerance))


def generation_provenance(response: dict[str, Any], candidate: Path) -> dict[str, Any]:
    request = response.get("request") or {}
    return {
        "model": response.get("model"),
        "params": request.get("params"),
        "seed": response.get("seed"),
        "prompt_sha256": response.get("prompt_sha256"),
        "response_sha256": sha256_file(layout.cand_file(candidate, layout.RESPONSE)),
    }


def compile_one(candidate: Path, args) -> dict[str, Any]:
    """Build one candidate (its response.json beside it says whether to), write build.json."""
    from kernelsweep.evaluator import compile_candidate

    skipped = not_evaluated(read_json(layout.cand_file(candidate, layout.RESPONSE)))
    if skipped:
        record = {"skipped": skipped["category"], "compiled": None}
    else:
        reference = layout.reference_of(candidate)
        record = compile_candidate(candidate, device=args.device, build_dir=Path(args.build_dir),
                                   timeout_s=args.timeout or _DEFAULTS.compile_timeout_s,
                                   log_dir=candidate.parent, reference=reference if reference.is_file() else None)
    record["cell"] = cell_of(candidate)
    out = layout.cand_file(candidate, layout.BUILD)
    write_json(out, record)
    print(f"{out}: compiled={record.get('compiled')} {record.get('category') or record.get('skipped') or ''}")
    return record


def run_compile(args) -> int:
    """The candidates of one turn, built in parallel (each build is its own child process)."""
    from concurrent.futures import ThreadPoolExecutor

    candidates = [Path(c) for c in args.candidates]
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        list(pool.map(lambda c: compile_one(c, args), candidates))
    return 0


def run_evaluate(args) -> int:
    from kernelsweep.evaluator import evaluate

    # In a study, its compile step's build.json names the rest: the candidate beside it,
    # the response beside that, the task's reference and record in the same results.
    candidate = Path(args.candidate or layout.cand_file(args.build, layout.CANDIDATE))
    try:
        reference = Path(args.reference or layout.reference_of(candidate))
    except ValueError as error:
        print(f"kernelsweep evaluate-candidate: no --reference given and {error}", file=sys.stderr)
        return 2
    response = read_json(args.response or layout.cand_file(candidate, layout.RESPONSE))
    skipped = not_evaluated(response)
    started = time.time()
    if skipped:
        record = _placeholder(skipped)
        # the profile the cell is judged under, though nothing was compared
        record["tolerance"] = _tolerance(args)
    else:
        task = read_json(args.task or layout.task_record_of(reference))
        given = {"device": args.device, "precision": args.precision, "trials": args.trials,
                 "timing_trials": args.timing_trials, "warmup": args.warmup, "timeout_s": args.timeout,
                 "compile_timeout_s": args.compile_timeout, "equivalence_margin": args.equivalence_margin,
                 "shape_variants": args.shape_variants, "tolerance": args.tolerance}
        record = evaluate(reference, candidate, build_dir=Path(args.build_dir),
                          log_dir=Path(args.out).parent, task_sha256=task["sha256"],
                          **{k: v for k, v in given.items() if v is not None})
        record.setdefault("provenance", {})["generation"] = generation_provenance(response, candidate)
        # tasks.scale: the task's size constants as evaluated (the task file's `scale`; null: as written)
        record["provenance"]["task_scale"] = task.get("scale")
    record["cell"] = cell_of(candidate)
    # When and where it ran: shows which evaluations shared a device, and when.
    record["run"] = {"started": started, "finished": time.time(), "host": socket.gethostname(),
                     "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                     "slot": os.environ.get("KERNELSWEEP_GPU_SLOT")}
    write_json(args.out, record)
    print(f"{args.out}: {record['category']} speedup={record.get('speedup')}")
    return 0


def _harness_guard(step):
    """A harness failure (not the candidate's fault: a broken reference, an
    unusable toolchain) writes no verdict: the job fails with the reason and
    the cell stays missing, so a rerun retries it. (A full disk, exit 4: kernelsweep.commands.cli.)"""
    def main(args) -> int:
        from kernelsweep.evaluator import HarnessError

        try:
            return step(args)
        except HarnessError as error:
            print(f"kernelsweep evaluate: the harness could not run: {error}", file=sys.stderr)
            return 2
    return main


class CompileTurn:
    """`kernelsweep compile-turn`: build a turn's candidates; writes build.json beside each."""

    @staticmethod
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--candidates", nargs="+", required=True,
                            help="candidate.py files (response.json beside each)")
        parser.add_argument("--jobs", type=int, default=1, help="builds in parallel")
        _common(parser)

    main = staticmethod(_harness_guard(run_compile))


class EvaluateCandidate:
    """`kernelsweep evaluate-candidate`: evaluate one candidate of the study; writes eval.json."""

    @staticmethod
    def configure(ev: argparse.ArgumentParser) -> None:
        named = ev.add_mutually_exclusive_group(required=True)
        named.add_argument("--build", help="the candidate's build.json of the study's compile step")
        named.add_argument("--candidate", help="a candidate.py (default: the one beside --build)")
        ev.add_argument("--response", help="its response.json (default: the one beside the candidate)")
        ev.add_argument("--reference", help="the task's reference (default: the study's, for the candidate's cell)")
        ev.add_argument("--task", help="the task's record (default: the one beside the reference)")
        ev.add_argument("--out", required=True)
        # Defaults: settings.EvalSettings, the evaluator's only source of them.
        ev.add_argument("--precision")
        ev.add_argument("--trials", type=int)
        ev.add_argument("--timing-trials", type=int)
        ev.add_argument("--warmup", type=int)
        ev.add_argument("--compile-timeout", type=float)
        ev.add_argument("--equivalence-margin", type=float)
        ev.add_argument("--shape-variants", type=int)
        ev.add_argument("--tolerance", choices=TOLERANCE_PROFILES)
        _common(ev)

    main = staticmethod(_harness_guard(run_evaluate))


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=("cpu", "cuda"), required=True)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--timeout", type=float)
