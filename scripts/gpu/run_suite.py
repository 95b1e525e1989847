"""The CUDA fixture suite: compile every CUDA fixture in parallel with no GPU
visible (the compile step), then evaluate each fixture on the GPU in a fixed
order (a hang, an illegal memory access and a segfault are each followed by a
healthy evaluation on the same GPU), check every category against what the
fixture is built to produce, and run the eval and compile subcommands once each.

Needs only torch (and triton for the Triton case) beside this package:
    PYTHONPATH=src python3 scripts/gpu/run_suite.py --out suite.json
Prints one line per case and writes everything to --out."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "src"))

from kernelsweep.evaluator import compile_candidate, evaluate  # noqa: E402
from kernelsweep.verdict import SUCCESS_CATEGORIES  # noqa: E402

FIXTURES = REPO / "tests" / "evaluator" / "fixtures"
REF, CUDA, CPU = FIXTURES / "references", FIXTURES / "cuda", FIXTURES / "cpu"
SUCCESS = set(SUCCESS_CATEGORIES)

# (label, reference, candidate, accepted categories, extra evaluate options)
CASES = [
    ("cuda kernel", REF / "vector_add.py", CUDA / "cuda_add.py", SUCCESS, {}),
    ("triton kernel", REF / "vector_add.py", CUDA / "triton_add.py", SUCCESS, {}),
    ("kernel built, not launched", REF / "vector_add.py", CUDA / "cuda_unused.py", {"no_custom_kernel"}, {}),
    ("side-stream cheat", REF / "vector_add.py", CUDA / "cuda_side_stream.py", {"cheat", "wrong_output"}, {}),
    ("illegal memory access", REF / "vector_add.py", CUDA / "cuda_illegal_access.py", {"crash"}, {}),
    ("healthy after illegal access", REF / "vector_add.py", CUDA / "cuda_add.py", SUCCESS, {}),
    ("host segfault", REF / "vector_add.py", CUDA / "cuda_segv.py", {"crash"}, {}),
    ("hung kernel", REF / "vector_add.py", CUDA / "cuda_spin.py", {"timeout"}, {"timeout_s": 25.0}),
    ("healthy after hang", REF / "vector_add.py", CUDA / "cuda_add.py", SUCCESS, {}),
    ("device out of memory", REF / "vector_add.py", CUDA / "cuda_oom.py", {"out_of_memory"}, {}),
    ("missing header", REF / "vector_add.py", CUDA / "cuda_bad_header.py", {"hallucinated_api"}, {}),
    ("undefined identifier", REF / "vector_add.py", CUDA / "cuda_undeclared.py", {"hallucinated_api"}, {}),
    ("nvcc type error", REF / "vector_add.py", CUDA / "cuda_compile_error.py", {"compile_error"}, {}),
    ("plain pytorch", REF / "add.py", CPU / "pytorch_only.py", {"no_custom_kernel"}, {}),
    ("mutates inputs", REF / "add.py", CPU / "cheat_mutate_inputs.py", {"cheat"}, {}),
    ("constant output", REF / "softmax_singleton.py", CPU / "cheat_constant.py", {"cheat"}, {}),
    ("wrong output", REF / "add.py", CPU / "wrong_output.py", {"wrong_output"}, {}),
    ("hallucinated attribute", REF / "add.py", CPU / "hallucinated_attr.py", {"hallucinated_api"}, {}),
]


def brief(record: dict) -> dict:
    keep = ("category", "compiled", "correct", "custom_kernel", "speedup", "speedup_ci", "timing_verdict", "faster",
            "max_abs_diff", "trials_passed", "flags", "wall_s", "compile_s", "gpu_s", "stage_s")
    out = {k: record.get(k) for k in keep}
    out["error"] = record.get("error") and {k: str(v)[:400] for k, v in record["error"].items() if k != "diagnostics"}
    launched = (record.get("kernel_evidence") or {}).get("launched") or {}
    out["launched_kernels"] = launched.get("kernels")
    for side in ("runtime_ms", "ref_runtime_ms"):
        if record.get(side):
            out[side] = {k: v for k, v in record[side].items() if k != "samples"}
    out["provenance"] = {k: record.get("provenance", {}).get(k) for k in ("device_name", "driver", "torch", "cuda",
                                                                         "capability", "cuda_arch")}
    return out


def cli(*args: str, timeout: float) -> dict:
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "kernelsweep", *args], capture_output=True, text=True, timeout=timeout,
                       env={**__import__("os").environ, "PYTHONPATH": str(REPO / "src")})
    try:
        record = json.loads(p.stdout)
    except json.JSONDecodeError:
        record = None
    return {"args": list(args), "returncode": p.returncode, "stderr": p.stderr[-1500:], "record": record,
            "wall_s": round(time.monotonic() - t0, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--build-dir", type=Path, default=None)
    parser.add_argument("--log-dir", type=Path, default=None)
    parser.add_argument("--workers", type=int, default=8, help="parallel compile workers")
    parser.add_argument("--timing-trials", type=int, default=30)
    parser.add_argument("--deadline", type=float, default=420.0, help="seconds; later cases are skipped")
    parser.add_argument("--only", default=None, help="comma-separated case labels to run (default: all)")
    args = parser.parse_args()
    t0 = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ks-gpu-suite-"))
    build = args.build_dir or work / "build"
    logs = args.log_dir or work / "logs"
    report: dict = {"cases": [], "compile": [], "cli": {}}

    cases = [c for c in CASES if not args.only or c[0] in args.only.split(",")]
    to_build = sorted({c[2] for c in cases if c[2].parent == CUDA and "load_inline" in c[2].read_text()})
    with ThreadPoolExecutor(args.workers) as pool:
        started = time.monotonic()
        records = list(pool.map(lambda p: compile_candidate(p, device="cuda", build_dir=build, timeout_s=600,
                                                            log_dir=logs / "compile"), to_build))
    report["compile_wall_s"] = round(time.monotonic() - started, 2)
    for path, rec in zip(to_build, records):
        line = {"candidate": path.name, "compiled": rec["compiled"], "category": rec["category"],
                "compile_s": rec["compile_s"], "error": (rec["error"] or {}).get("message", "")[:300]}
        report["compile"].append(line)
        print(f"compile {path.name:28s} compiled={rec['compiled']} category={rec['category']} "
              f"compile_s={rec['compile_s']}", flush=True)
    print(f"compile phase: {report['compile_wall_s']} s wall with {args.workers} workers", flush=True)

    passed = 0
    for i, (label, ref, cand, accepted, extra) in enumerate(cases):
        if time.monotonic() - t0 > args.deadline:
            report["cases"].append({"label": label, "candidate": cand.name, "skipped": "deadline"})
            continue
        options = dict(device="cuda", trials=5, timing_trials=args.timing_trials, warmup=5, timeout_s=120.0,
                       build_dir=build, log_dir=logs / f"{i:02d}-{cand.stem}")
        options.update(extra)
        try:
            record = evaluate(ref, cand, **options)
            ok = record["category"] in accepted
            if accepted == SUCCESS:
                ok = ok and record["custom_kernel"]
            entry = {"label": label, "reference": ref.name, "candidate": cand.name, "ok": ok,
                     "accepted": sorted(accepted), **brief(record)}
        except Exception as exc:  # noqa: BLE001 - reported as a failed case
            ok = False
            entry = {"label": label, "candidate": cand.name, "ok": False, "exception": f"{type(exc).__name__}: {exc}"}
        passed += ok
        report["cases"].append(entry)
        print(f"{'PASS' if ok else 'FAIL'} {label:30s} {entry.get('category')!s:18s} flags={entry.get('flags')} "
              f"speedup={entry.get('speedup')} gpu_s={entry.get('gpu_s')} wall={entry.get('wall_s')} "
              f"err={(entry.get('error') or {}).get('message', entry.get('exception', ''))[:160]!r}", flush=True)

    if not args.only:
        report["cli"]["eval"] = cli("eval", str(REF / "vector_add.py"), str(CUDA / "cuda_add.py"), "--device",
                                    "cuda", "--timing-trials", "20", "--build-dir", str(build), timeout=300)
        report["cli"]["compile"] = cli("compile", str(CUDA / "cuda_bad_header.py"), "--device", "cuda",
                                       "--build-dir", str(build), timeout=300)
    for name, res in report["cli"].items():
        rec = res["record"] or {}
        print(f"cli {name}: rc={res['returncode']} category={rec.get('category')} wall={res['wall_s']}", flush=True)
    report["passed"] = passed
    report["total"] = len(cases)
    report["wall_s"] = round(time.monotonic() - t0, 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(f"suite: {passed}/{len(cases)} cases passed in {report['wall_s']} s", flush=True)
    return 0 if passed == len(cases) else 1


if __name__ == "__main__":
    sys.exit(main())
