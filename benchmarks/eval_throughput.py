"""Evaluation throughput: compile on CPU workers first, or compile inside the
evaluation?

For a set of candidates (each a build of its own), two modes, each with a
cold build cache of its own:
- pool:   the compile step for all candidates on N CPU workers in parallel
          (no GPU visible), then the evaluations one after another;
- inline: the evaluations one after another, each building its extension
          inside the candidate worker (holding the GPU meanwhile).
Prints, per candidate, compile seconds, GPU-held seconds (wall time of the
workers that hold the device) and wall seconds, then totals per mode; writes
the same as JSON with --out.

    PYTHONPATH=src python3 benchmarks/eval_throughput.py --device cuda --workers 4 --out t.json
    PYTHONPATH=src python3 benchmarks/eval_throughput.py --device cpu --workers 2   # C++ fixtures
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from kernelsweep.evaluator import compile_candidate, evaluate  # noqa: E402

FIXTURES = REPO / "tests" / "evaluator" / "fixtures"
DEFAULTS = {
    "cuda": (FIXTURES / "references" / "vector_add.py",
             sorted((FIXTURES / "cuda").glob("bench_*.py"))),
    "cpu": (FIXTURES / "references" / "add.py",
            [FIXTURES / "cpu" / "cpp_add.py", FIXTURES / "cpu" / "cpp_bad_header.py"]),
}


def run_mode(mode: str, reference: Path, candidates: list[Path], args: argparse.Namespace) -> dict:
    build = Path(tempfile.mkdtemp(prefix=f"ks-bench-{mode}-"))
    logs = build / "logs"
    t0 = time.monotonic()
    compile_s: dict[str, float] = {}
    compile_wall = 0.0
    if mode == "pool":
        with ThreadPoolExecutor(args.workers) as pool:
            records = list(pool.map(lambda c: compile_candidate(c, device=args.device, build_dir=build,
                                                                timeout_s=900, log_dir=logs), candidates))
        compile_wall = time.monotonic() - t0
        compile_s = {c.name: r["compile_s"] for c, r in zip(candidates, records)}
    rows = []
    for cand in candidates:
        t = time.monotonic()
        r = evaluate(reference, cand, device=args.device, trials=args.trials, timing_trials=args.timing_trials,
                     warmup=args.warmup, build_dir=build, log_dir=logs / cand.stem)
        stages = r["stage_s"]
        held = stages.get("correctness", 0.0) + stages.get("timing", 0.0)  # as gpu_s on cuda
        rows.append({
            "candidate": cand.name, "category": r["category"],
            "compile_s": compile_s.get(cand.name, r["compile_s"]) if mode == "pool" else r["compile_s"],
            "eval_compile_s": r["compile_s"],
            "device_held_s": round(held, 2), "eval_wall_s": round(time.monotonic() - t, 2),
        })
    return {"mode": mode, "rows": rows, "compile_wall_s": round(compile_wall, 2),
            "wall_s": round(time.monotonic() - t0, 2),
            "device_held_s": round(sum(r["device_held_s"] for r in rows), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description="compile on CPU workers vs inline: evaluation throughput")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--reference", type=Path, default=None)
    parser.add_argument("--candidates", type=Path, nargs="*", default=None)
    parser.add_argument("--workers", type=int, default=4, help="CPU workers of the compile pool")
    parser.add_argument("--modes", default="pool,inline")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--timing-trials", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reference, candidates = DEFAULTS[args.device]
    reference = args.reference or reference
    candidates = args.candidates or candidates
    results = []
    for mode in args.modes.split(","):
        results.append(run_mode(mode, reference, candidates, args))
        if args.out:  # after each mode, so a run cut short still leaves figures
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps({"device": args.device, "workers": args.workers, "results": results},
                                           indent=1))

    print(f"{'mode':7s} {'candidate':28s} {'category':18s} {'compile_s':>9s} {'device_s':>9s} {'wall_s':>8s}")
    for res in results:
        for row in res["rows"]:
            print(f"{res['mode']:7s} {row['candidate']:28s} {row['category']:18s} {row['compile_s']:9.1f} "
                  f"{row['device_held_s']:9.1f} {row['eval_wall_s']:8.1f}")
    for res in results:
        n = len(res["rows"])
        print(f"{res['mode']}: {n} candidates, wall {res['wall_s']:.1f} s (compile phase {res['compile_wall_s']:.1f} s "
              f"on {args.workers} workers), device held {res['device_held_s']:.1f} s "
              f"= {res['device_held_s'] / max(n, 1):.1f} s per candidate")
    return 0


if __name__ == "__main__":
    sys.exit(main())
