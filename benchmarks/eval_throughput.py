"""Evaluation throughput: compile on CPU workers first, or compile inside the
evaluation?

For a set of candidates (each a build of its own), two modes, each with a
cold build cache of its own:
- pool:   the compile step for all candidates on N CPU workers in parallel
          (no GPU visible), then the evaluations one after another;
- inline: the evaluations one after another, each building its extension
          inside the candidate worker (holding the GPU meanwhile).
- late:   builds as in pool, then the evaluations as separate commands
          through `kernelsweep gpu-slots run --late`, four at a time on one
          GPU (as the workflow runs them with --resources gpu=4): three
          warm up while one times; device time is the held span (gpu_s).
- kernelbench: the same candidates through KernelBench's own evaluator
          (benchmarks/kernelbench_anchor.py: builds first on N workers,
          then one fresh process per evaluation, as its scripts run it).
Prints, per candidate, compile seconds, GPU-held seconds (wall time of the
workers that hold the device) and wall seconds, then totals per mode and,
with kernelbench among the modes, kernelsweep's wall time per candidate as a
ratio of KernelBench's; writes the same as JSON with --out.

    PYTHONPATH=src python3 benchmarks/eval_throughput.py --device cuda --modes pool,kernelbench \
        --pairs-from-replay zero_shot --limit 9 --out t.json

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

from kernelsweep.runtime import gpu_slots  # noqa: E402
from kernelsweep.evaluator import HarnessError, compile_candidate, evaluate  # noqa: E402
from kernelsweep.evaluator.settings import EvalSettings  # noqa: E402

FIXTURES = REPO / "tests" / "evaluator" / "fixtures"
DEFAULTS = {
    "cuda": (FIXTURES / "references" / "vector_add.py",
             sorted((FIXTURES / "cuda").glob("bench_*.py"))),
    "cpu": (FIXTURES / "references" / "add.py",
            [FIXTURES / "cpu" / "cpp_add.py", FIXTURES / "cpu" / "cpp_bad_header.py"]),
}


def replay_pairs(method: str, limit: int, folder: Path, tasks: set[str] | None = None) -> list[tuple[Path, Path]]:
    """(reference, candidate) for the final responses of a published replay
    source (in $KERNELSWEEP_SHARED) that hold code, written into FOLDER;
    only those of TASKS when given."""
    import os

    from kernelsweep.tasks.ids import parse_task_id
    from kernelsweep.tasks.local import LocalSource  # the one reader of the KernelBench layout

    shared = Path(os.environ.get("KERNELSWEEP_SHARED", REPO.parent / "shared"))
    pairs = []
    for line in (shared / "replay" / "kernelbench-agentic" / f"{method}.jsonl").read_text().splitlines():
        row = json.loads(line)
        if not row.get("final") or not (row.get("extracted_code") or "").strip():
            continue
        if tasks and row["task"] not in tasks:
            continue
        cand = folder / f"{row['task']}.py"
        cand.write_text(row["extracted_code"])
        level, problem = parse_task_id(row["task"])
        pairs.append((LocalSource(shared / "kernelbench").files(level)[problem], cand))
        if len(pairs) >= limit:
            break
    return pairs


def progress(mode: str, row: dict) -> None:
    """One line per finished candidate, at once: a run cut short by its time
    limit still shows where the time went."""
    print(f"[{mode}] {row['candidate']} {row['category']} device_held_s={row['device_held_s']} "
          f"wall_s={row['eval_wall_s']} outputs={row.get('output_handoff')} stage_s={row.get('stage_s')}", file=sys.stderr, flush=True)


def run_kernelbench(pairs: list[tuple[Path, Path]], args: argparse.Namespace) -> dict:
    import subprocess

    build = Path(tempfile.mkdtemp(prefix="ks-bench-kernelbench-"))
    anchor = [sys.executable, str(REPO / "benchmarks" / "kernelbench_anchor.py")]
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.workers) as pool:
        list(pool.map(lambda p: subprocess.run(anchor + ["build", str(p[1]), str(build / p[1].stem)],
                                               capture_output=True, text=True), pairs))
    compile_wall = time.monotonic() - t0
    print(f"[kernelbench] builds {compile_wall:.1f} s", file=sys.stderr, flush=True)
    rows = []
    for ref, cand in pairs:
        t = time.monotonic()
        proc = subprocess.run(anchor + ["eval", str(ref), str(cand), str(build / cand.stem), str(args.trials),
                                        str(args.timing_trials)], capture_output=True, text=True)
        wall = time.monotonic() - t
        lines = [x for x in proc.stdout.splitlines() if x.startswith("{")]
        r = json.loads(lines[-1]) if lines else {}
        rows.append({"candidate": cand.name, "category": f"c={r.get('compiled')} ok={r.get('correctness')}",
                     "compile_s": 0.0, "device_held_s": round(wall, 2), "eval_wall_s": round(wall, 2),
                     "runtime_ms": r.get("runtime_ms")})
        progress("kernelbench", rows[-1])
    return {"mode": "kernelbench", "rows": rows, "compile_wall_s": round(compile_wall, 2),
            "wall_s": round(time.monotonic() - t0, 2),
            "device_held_s": round(sum(r["device_held_s"] for r in rows), 2)}


def compile_pool(candidates: list[Path], build: Path, args: argparse.Namespace) -> dict[str, float]:
    """Every candidate's build on the CPU workers, no GPU held; compile seconds by name."""
    with ThreadPoolExecutor(args.workers) as pool:
        records = list(pool.map(lambda c: compile_candidate(c, device=args.device, build_dir=build,
                                                            timeout_s=900, log_dir=build / "logs"), candidates))
    return {c.name: r["compile_s"] for c, r in zip(candidates, records)}


def run_late(pairs: list[tuple[Path, Path]], args: argparse.Namespace) -> dict:
    import subprocess

    build = Path(tempfile.mkdtemp(prefix="ks-bench-late-", dir=args.work))
    t0 = time.monotonic()
    compile_s = compile_pool([c for _, c in pairs], build, args)
    compile_wall = time.monotonic() - t0

    def one(pair: tuple[Path, Path]) -> dict:
        reference, cand = pair
        out = build / "records" / f"{cand.stem}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "kernelsweep", "gpu-slots", "run", "--slots-dir", str(build / "slots"),
               "--gpus", "1" if args.device == "cuda" else "cpu", "--late", "--",
               sys.executable, "-m", "kernelsweep", "eval", str(reference), str(cand), "--device", args.device,
               "--trials", str(args.trials), "--timing-trials", str(args.timing_trials),
               "--warmup", str(args.warmup), "--build-dir", str(build), "--out", str(out)]
        t = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        r = json.loads(out.read_text()) if out.is_file() else {"category": f"exit {proc.returncode}"}
        row = {"candidate": cand.name, "category": r.get("category"), "compile_s": compile_s.get(cand.name, 0.0),
                "device_held_s": round(r["gpu_s"] if r.get("gpu_s") is not None else r.get("wall_s") or 0.0, 2),
                "eval_wall_s": round(time.monotonic() - t, 2), "stage_s": r.get("stage_s"),
                "output_handoff": (r.get("provenance") or {}).get("output_handoff"),
                "runtime_ms": (r.get("runtime_ms") or {}).get("median"), "speedup": r.get("speedup")}
        progress("late", row)
        return row

    t1 = time.monotonic()
    with ThreadPoolExecutor(1 + gpu_slots.QUEUE_PLACES) as pool:  # one timing, the queue warming up
        rows = list(pool.map(one, pairs))
    evals_wall = time.monotonic() - t1
    return {"mode": "late", "rows": rows, "compile_wall_s": round(compile_wall, 2),
            "wall_s": round(time.monotonic() - t0, 2), "evaluations_wall_s": round(evals_wall, 2),
            "device_held_s": round(sum(r["device_held_s"] for r in rows), 2)}


def run_mode(mode: str, pairs: list[tuple[Path, Path]], args: argparse.Namespace) -> dict:
    if mode == "kernelbench":
        return run_kernelbench(pairs, args)
    if mode == "late":
        return run_late(pairs, args)
    candidates = [c for _, c in pairs]
    build = Path(tempfile.mkdtemp(prefix=f"ks-bench-{mode}-", dir=args.work))
    logs = build / "logs"
    t0 = time.monotonic()
    compile_s: dict[str, float] = {}
    compile_wall = 0.0
    if mode == "pool":
        compile_s = compile_pool(candidates, build, args)
        compile_wall = time.monotonic() - t0
        print(f"[{mode}] builds {compile_wall:.1f} s", file=sys.stderr, flush=True)
    rows = []
    for reference, cand in pairs:
        t = time.monotonic()
        try:
            r = evaluate(reference, cand, device=args.device, trials=args.trials, timing_trials=args.timing_trials,
                         warmup=args.warmup, build_dir=build, log_dir=logs / cand.stem)
        except HarnessError as exc:  # reported as a row; the other candidates still run
            print(f"{cand.name}: harness error: {exc}", file=sys.stderr)
            r = {"category": "harness_error", "compile_s": 0.0, "wall_s": time.monotonic() - t}
        held = r["gpu_s"] if r.get("gpu_s") is not None else r["wall_s"]
        rows.append({
            "candidate": cand.name, "category": r["category"],
            "compile_s": compile_s.get(cand.name, r["compile_s"]) if mode == "pool" else r["compile_s"],
            "eval_compile_s": r["compile_s"],
            "device_held_s": round(held, 2), "eval_wall_s": round(time.monotonic() - t, 2),
            "runtime_ms": (r.get("runtime_ms") or {}).get("median"), "speedup": r.get("speedup"),
            "stage_s": r.get("stage_s"), "output_handoff": (r.get("provenance") or {}).get("output_handoff"),
        })
        progress(mode, rows[-1])
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
    parser.add_argument("--trials", type=int, default=EvalSettings.trials)  # the evaluation's own defaults
    parser.add_argument("--timing-trials", type=int, default=EvalSettings.timing_trials)
    parser.add_argument("--warmup", type=int, default=EvalSettings.warmup)
    parser.add_argument("--pairs-from-replay", default=None, metavar="METHOD",
                        help="candidates: the final responses of this published replay method (zero_shot, ...)")
    parser.add_argument("--limit", type=int, default=9, help="with --pairs-from-replay: how many")
    parser.add_argument("--replay-tasks", default=None, metavar="IDS",
                        help="with --pairs-from-replay: only these tasks, e.g. L2-001,L3-004")
    parser.add_argument("--work", type=Path, default=None, help="folder for builds and logs (default: a temporary one)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    reference, candidates = DEFAULTS[args.device]
    reference = args.reference or reference
    pairs = [(reference, c) for c in (args.candidates or candidates)]
    if args.pairs_from_replay:
        pairs = replay_pairs(args.pairs_from_replay, args.limit, Path(tempfile.mkdtemp(prefix="ks-replay-")),
                             set(args.replay_tasks.split(",")) if args.replay_tasks else None) + pairs
    results = []
    for mode in args.modes.split(","):
        results.append(run_mode(mode, pairs, args))
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
        if "evaluations_wall_s" in res:
            print(f"{res['mode']}: evaluations {res['evaluations_wall_s']:.1f} s wall = "
                  f"{3600 * n / max(res['evaluations_wall_s'], 1e-9):.0f} candidates per hour on one device")
    by_mode = {res["mode"]: res for res in results}
    # GPU-held time per candidate: KernelBench's process holds the device all its life; ours, the
    # span the evaluation holds it (late: after the workers warmed up, as the workflow runs it).
    ours_mode = next((m for m in ("late", "pool") if m in by_mode), None)
    if "kernelbench" in by_mode and ours_mode:
        ours = {r["candidate"]: r["device_held_s"] for r in by_mode[ours_mode]["rows"]}
        ratios = [ours[r["candidate"]] / r["eval_wall_s"] for r in by_mode["kernelbench"]["rows"]
                  if r["candidate"] in ours and r["eval_wall_s"] > 0]
        if ratios:
            ratios.sort()
            print(f"kernelsweep ({ours_mode}) / KernelBench GPU-held time per candidate: median "
                  f"{ratios[len(ratios) // 2]:.2f} (range {ratios[0]:.2f}-{ratios[-1]:.2f}, {len(ratios)} candidates; "
                  f"goal <= 1.0)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
