"""The compile and evaluate stages of the study: thin wrappers around
kernelsweep.evaluator that (1) turn a stopped turn or a failed model call into a
record without running anything, and (2) link every evaluation to the
generation and prompt it came from.

    python -m kernelsweep.stages.evaluate compile  --candidates C0 C1 ... --device D --build-dir B
    python -m kernelsweep.stages.evaluate evaluate --candidate C --response R --out E ...
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import time
from pathlib import Path
from typing import Any

from kernelsweep import metrics
from kernelsweep.fileio import read_json, sha256_file, write_json


def cell_of(candidate: Path) -> dict[str, Any]:
    """{model, method, task, sample, turn, cand} from …/runs/M/METHOD/TASK/sS/tT/cC/candidate.py."""
    c, t, s, task, method, model = candidate.parts[-2:-8:-1]
    return {"model": model, "method": method, "task": task, "sample": int(s[1:]), "turn": int(t[1:]), "cand": int(c[1:])}


def not_evaluated(response: dict[str, Any]) -> dict[str, Any] | None:
    """The record for a candidate that must not run: a stopped turn or a failed call."""
    status = response.get("status")
    if status == "stopped":
        return {"category": "stopped", "error": None}
    if status != "ok":
        return {"category": "generation_failed",
                "error": {"type": "GenerationFailed", "message": str(response.get("error") or "model call failed"), "log": None}}
    return None


def _placeholder(kind: dict[str, Any]) -> dict[str, Any]:
    return {"schema": "kernelsweep/eval/1", "compiled": None, "correct": False, "custom_kernel": False,
            "speedup": None, "speedup_ci": None, "timing_verdict": None, "faster": None,
            "runtime_ms": None, "ref_runtime_ms": None, "max_abs_diff": None, "flags": [],
            "wall_s": 0.0, "compile_s": 0.0, **kind}


def generation_provenance(response: dict[str, Any], candidate: Path) -> dict[str, Any]:
    request = response.get("request") or {}
    return {
        "model": response.get("model"),
        "params": request.get("params"),
        "seed": response.get("seed"),
        "prompt_sha256": response.get("prompt_sha256"),
        "response_sha256": sha256_file(candidate.with_name("response.json")),
    }


def compile_one(candidate: Path, args) -> dict[str, Any]:
    """Build one candidate (its response.json beside it says whether to), write build.json."""
    from kernelsweep.evaluator import compile_candidate

    skipped = not_evaluated(read_json(candidate.with_name("response.json")))
    if skipped:
        record = {"skipped": skipped["category"], "compiled": None}
    else:
        record = compile_candidate(candidate, device=args.device, build_dir=Path(args.build_dir),
                                   timeout_s=args.timeout, log_dir=candidate.parent)
    record["cell"] = cell_of(candidate)
    out = candidate.with_name("build.json")
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

    candidate = Path(args.candidate)
    response = read_json(args.response)
    skipped = not_evaluated(response)
    started = time.time()
    if skipped:
        record = _placeholder(skipped)
    else:
        task = read_json(args.task)
        record = evaluate(
            Path(args.reference), candidate, device=args.device, precision=args.precision,
            trials=args.trials, timing_trials=args.timing_trials, warmup=args.warmup,
            timeout_s=args.timeout, compile_timeout_s=args.compile_timeout,
            equivalence_margin=args.equivalence_margin,
            build_dir=Path(args.build_dir), log_dir=Path(args.out).parent, task_sha256=task["sha256"],
        )
        record.setdefault("provenance", {})["generation"] = generation_provenance(response, candidate)
    record["cell"] = cell_of(candidate)
    # When and where it ran: shows which evaluations shared a device, and when.
    record["run"] = {"started": started, "finished": time.time(), "host": socket.gethostname(),
                     "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
                     "slot": os.environ.get("KERNELSWEEP_GPU_SLOT")}
    write_json(args.out, record)
    print(f"{args.out}: {record['category']} speedup={record.get('speedup')}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kernelsweep.stages.evaluate")
    sub = parser.add_subparsers(dest="step", required=True)
    build = sub.add_parser("compile", help="build a turn's candidates; writes build.json beside each")
    build.add_argument("--candidates", nargs="+", required=True, help="candidate.py files (response.json beside each)")
    build.add_argument("--jobs", type=int, default=1, help="builds in parallel")
    ev = sub.add_parser("evaluate", help="evaluate one candidate; writes eval.json")
    ev.add_argument("--candidate", required=True)
    ev.add_argument("--response", required=True)
    ev.add_argument("--out", required=True)
    ev.add_argument("--build", help="build.json of the compile step (ordering only)")
    ev.add_argument("--reference", required=True)
    ev.add_argument("--task", required=True)
    ev.add_argument("--precision", default="fp32")
    ev.add_argument("--trials", type=int, default=5)
    ev.add_argument("--timing-trials", type=int, default=100)
    ev.add_argument("--warmup", type=int, default=10)
    ev.add_argument("--compile-timeout", type=float, default=600.0)
    ev.add_argument("--equivalence-margin", type=float, default=metrics.EQUIVALENCE_MARGIN)
    for p in (build, ev):
        p.add_argument("--device", choices=("cpu", "cuda"), required=True)
        p.add_argument("--build-dir", required=True)
        p.add_argument("--timeout", type=float, default=240.0)
    return parser


def main(argv: list[str] | None = None) -> int:
    from kernelsweep.evaluator import HarnessError

    args = build_parser().parse_args(argv)
    try:
        return run_compile(args) if args.step == "compile" else run_evaluate(args)
    except HarnessError as error:
        # Not the candidate's fault (a broken reference, an unusable toolchain):
        # no verdict is written, the job fails with the reason, the cell shows as missing.
        print(f"kernelsweep evaluate: the harness could not run: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
