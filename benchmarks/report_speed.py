"""Benchmark of `kernelsweep report` on a synthetic study of realistic size
(prints figures; not a test). Usage:

    python benchmarks/report_speed.py [--tasks 100] [--samples 1] [--jobs 1] [--keep DIR]

With --keep, the synthetic results are written once into DIR and reused by later runs.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "src"), str(REPO / "tests" / "report")]  # the package; the synthetic results writer

from synthetic import AGENTIC, ResultsWriter  # noqa: E402

from kernelsweep.core import verdict  # noqa: E402

METHODS = {"zero_shot": {"strategy": "zero_shot", "turns": 1, "n": 1},
           "agentic": dict(AGENTIC, turns=3, n=4), "agentic_no_rag": dict(AGENTIC, turns=3, n=4, researcher=False),
           "agentic_n1": dict(AGENTIC, turns=3, n=1), "agentic_n8": dict(AGENTIC, turns=3, n=8)}
MODES = ["eager", "inductor-default", "inductor-reduce-overhead", "inductor-max-autotune"]


def write_study(root: Path, n_tasks: int, samples: int, timing_samples: int = 100) -> dict:
    rng = random.Random(0)
    w = ResultsWriter(root)
    tasks = [{"id": f"L{1 + i % 3}-{i + 1:03d}", "level": 1 + i % 3, "name": f"task_{i}"} for i in range(n_tasks)]
    for t in tasks:
        w.task(t["id"], t["level"], t["name"])
        base = rng.uniform(0.1, 10.0)
        w.baseline(t["id"], {m: [base * rng.uniform(0.5, 1.1) * rng.gauss(1, 0.02) for _ in range(timing_samples)]
                             for m in MODES})
    for method, spec in METHODS.items():
        for t in tasks:
            for s in range(samples):
                if rng.random() < 0.01:
                    continue  # a missing cell
                records = []
                for turn in range(spec["turns"]):
                    for cand in range(spec["n"]):
                        category = rng.choice(verdict.CATEGORIES)
                        timed = category in verdict.NUMERICALLY_CORRECT or category == "cheat"
                        ref = [rng.gauss(2.0, 0.05) for _ in range(timing_samples)] if timed else None
                        cand_t = [rng.gauss(2.0 / rng.uniform(0.3, 3), 0.05) for _ in range(timing_samples)] \
                            if timed else None
                        records.append(((turn, cand), w.candidate("m1", method, t["id"], s, turn, cand, category,
                                                                  ref, cand_t)))
                best = max(records, key=lambda r: verdict.selection_key(r[1]))  # ties: any, fine here
                w.final("m1", method, t["id"], t["level"], s, best=best[0], result=best[1],
                        candidates_evaluated=len(records), llm_calls=len(records))
    return {"device": "cpu", "models": {"m1": {"backend": "openai"}}, "methods": METHODS, "ablation_base": "agentic",
            "tasks": tasks, "samples": samples, "baseline_modes": MODES, "config": {}}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="write the synthetic results here and keep them")
    args = parser.parse_args()
    from kernelsweep.report.collect import collect
    from kernelsweep.report.figures import build_figures, save_figure
    from kernelsweep.report.spec import parse_study
    from kernelsweep.report.tables import build_tables, write_table

    root = args.keep or Path(tempfile.mkdtemp(prefix="ks-report-bench-"))
    t0 = time.perf_counter()
    if not (root / "study.json").exists():
        (root / "study.json").write_text(json.dumps(write_study(root / "results", args.tasks, args.samples)))
    spec = parse_study(json.loads((root / "study.json").read_text()))
    t1 = time.perf_counter()
    c = collect(root / "results", spec, jobs=args.jobs)
    t2 = time.perf_counter()
    tables = build_tables(c.cells, c.candidates, spec)
    for table in tables:
        write_table(table, root / "out" / "tables")
    t3 = time.perf_counter()
    data = {t.name: t.data for t in tables}
    for name, draw in build_figures(data, c.cells, c.candidates, spec).items():
        save_figure(draw(), root / "out" / "figures", name)
    t4 = time.perf_counter()
    compile_columns = [f"speedup_{m.replace('-', '_')}" for m in spec.compile_modes]
    comparisons = int(c.candidates[compile_columns].notna().sum().sum())
    print(f"cells: {len(c.cells)}  candidates: {len(c.candidates)}  torch.compile comparisons: {comparisons}  "
          f"(preparing the synthetic files: {t1 - t0:.1f} s)")
    per_candidate = 1e3 * (t2 - t1) / max(len(c.candidates), 1)
    print(f"collect (read + compare timings): {t2 - t1:.2f} s  ({per_candidate:.2f} ms/candidate)")
    print(f"tables (bootstrap + write):       {t3 - t2:.2f} s")
    print(f"figures (PNG + SVG):              {t4 - t3:.2f} s")
    print(f"total report work:                {t4 - t1:.2f} s   files under {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
