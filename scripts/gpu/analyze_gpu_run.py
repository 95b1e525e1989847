"""Summarise a GPU run of the DAG (scripts/gpu_dag_run.sh): which device each
evaluation used and when, whether two evaluations ever shared a device at the
same time, and whether each candidate's timing in the DAG matches the same
candidate timed alone (and timed beside a generation load) within the
measured spread (kernelsweep.core.metrics.compare_timings: 'tie' = indistinguishable).

    python scripts/gpu/analyze_gpu_run.py RESULTS_DIR [--alone DIR] [--loaded DIR] --out summary.json
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

from kernelsweep.core.metrics import compare_timings


def load_evals(results: Path) -> dict[str, dict]:
    evals = {}
    for path in sorted(results.glob("runs/*/*/*/*/s*/t*/c*/eval.json")):
        evals[str(path.relative_to(results / "runs").parent)] = json.loads(path.read_text())
    return evals


def overlap(a: dict, b: dict) -> bool:
    return a["run"]["started"] < b["run"]["finished"] and b["run"]["started"] < a["run"]["finished"]


def compare_runs(dag: dict[str, dict], other_dir: Path | None) -> list[dict]:
    """The same candidate in the DAG vs in another run (files named after the cell path)."""
    rows = []
    if not other_dir:
        return rows
    for path in sorted(other_dir.glob("*.json")):
        cell = path.stem.replace("__", "/")
        other, mine = json.loads(path.read_text()), dag.get(cell)
        if not mine or not (mine.get("runtime_ms") or {}).get("samples") or not (other.get("runtime_ms") or {}).get("samples"):
            continue
        cmp = compare_timings(other["runtime_ms"]["samples"], mine["runtime_ms"]["samples"], margin=0.0)
        # The number the study publishes is the speedup (reference and candidate interleaved in
        # one process); it matches when the two runs' speedup intervals overlap.
        a, b = mine.get("speedup_ci"), other.get("speedup_ci")
        rows.append({"cell": cell, "dag_median_ms": mine["runtime_ms"]["median"], "other_median_ms": other["runtime_ms"]["median"],
                     "ratio": cmp["speedup"], "ratio_ci": cmp["speedup_ci"], "verdict": cmp["verdict"],
                     "dag_speedup": mine.get("speedup"), "dag_speedup_ci": a,
                     "other_speedup": other.get("speedup"), "other_speedup_ci": b,
                     "speedup_intervals_overlap": bool(a and b and a[0] <= b[1] and b[0] <= a[1]),
                     "dag_category": mine.get("category"), "other_category": other.get("category"),
                     "other_device": (other.get("provenance") or {}).get("visible_devices")})
    return rows


def _ci(interval) -> str:
    return f"[{interval[0]:.4f}, {interval[1]:.4f}]" if interval else "[-]"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("results", type=Path)
    parser.add_argument("--alone", type=Path)
    parser.add_argument("--loaded", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    evals = load_evals(args.results)
    ran = {k: v for k, v in evals.items() if v.get("run") and v.get("category") not in ("stopped", "generation_failed")}
    rows = [{"cell": k, "category": v["category"], "speedup": v.get("speedup"), "speedup_ci": v.get("speedup_ci"),
             "runtime_median_ms": (v.get("runtime_ms") or {}).get("median"),
             "ref_median_ms": (v.get("ref_runtime_ms") or {}).get("median"),
             "device": v["run"]["cuda_visible_devices"], "started": v["run"]["started"], "finished": v["run"]["finished"]}
            for k, v in ran.items()]
    shared = [(a, b) for (a, va), (b, vb) in itertools.combinations(ran.items(), 2)
              if overlap(va, vb) and va["run"]["cuda_visible_devices"] == vb["run"]["cuda_visible_devices"]]
    concurrent = [(a, b) for (a, va), (b, vb) in itertools.combinations(ran.items(), 2) if overlap(va, vb)]
    summary = {
        "evaluations": len(ran),
        "devices_used": sorted({r["device"] or "?" for r in rows}),
        "pairs_running_at_once": len(concurrent),
        "pairs_sharing_a_device_at_once": len(shared),
        "shared_examples": shared[:5],
        "rows": rows,
        "alone_vs_dag": compare_runs(ran, args.alone),
        "loaded_vs_dag": compare_runs(ran, args.loaded),
    }
    for name in ("alone_vs_dag", "loaded_vs_dag"):
        compared = summary[name]
        summary[name + "_counts"] = {
            "compared": len(compared),
            "median_time_tie": sum(r["verdict"] == "tie" for r in compared),
            "speedup_intervals_overlap": sum(r["speedup_intervals_overlap"] for r in compared),
            "same_category": sum(r["dag_category"] == r["other_category"] for r in compared),
        }
    args.out.write_text(json.dumps(summary, indent=1))
    print(f"evaluations: {summary['evaluations']}  devices: {summary['devices_used']}  "
          f"pairs at once: {summary['pairs_running_at_once']}  pairs sharing a device at once: {len(shared)}")
    for r in rows:
        print(f"  {r['cell']:<48} {r['category']:<16} dev={r['device']} speedup={r['speedup'] and round(r['speedup'], 3)} "
              f"cand={r['runtime_median_ms'] and round(r['runtime_median_ms'], 4)} ms")
    for name in ("alone_vs_dag", "loaded_vs_dag"):
        for r in summary[name]:
            print(f"  {name}: {r['cell']:<44} dag {r['dag_median_ms']:.4f} ms vs {r['other_median_ms']:.4f} ms "
                  f"ratio {r['ratio']:.3f} [{r['ratio_ci'][0]:.3f}, {r['ratio_ci'][1]:.3f}] -> {r['verdict']}; "
                  f"speedup {r['dag_speedup']:.4f} {_ci(r['dag_speedup_ci'])} vs {r['other_speedup']:.4f} "
                  f"{_ci(r['other_speedup_ci'])} overlap={r['speedup_intervals_overlap']}")
        if summary[name]:
            print(f"  {name}: {summary[name + '_counts']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
