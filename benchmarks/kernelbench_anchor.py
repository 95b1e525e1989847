"""Evaluate one candidate with KernelBench's own evaluator (the anchor in
$KERNELSWEEP_SHARED/anchors/kernelbench-eval), in this process, and print one
JSON line: compiled, correctness, runtime (ms), seconds. Run once per
candidate in a fresh process, as KernelBench's scripts do; used by
benchmarks/eval_throughput.py --modes kernelbench.

    python3 benchmarks/kernelbench_anchor.py build CANDIDATE.py BUILD_DIR
    python3 benchmarks/kernelbench_anchor.py eval REFERENCE.py CANDIDATE.py BUILD_DIR [TRIALS TIMING_TRIALS]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path


def anchor_root() -> Path:
    shared = Path(os.environ.get("KERNELSWEEP_SHARED", Path(__file__).resolve().parents[2] / "shared"))
    return shared / "anchors" / "kernelbench-eval"


def main(argv: list[str]) -> int:
    root = anchor_root()
    sys.path[:0] = [str(root / "stubs"), str(root / "src")]
    t0 = time.monotonic()
    import torch
    from kernelbench.eval import build_compile_cache, eval_kernel_against_ref

    if argv[0] == "build":
        ok = build_compile_cache(Path(argv[1]).read_text(), verbose=False, build_dir=argv[2])
        print(json.dumps({"built": bool(ok if not isinstance(ok, tuple) else ok[0]), "seconds": time.monotonic() - t0}))
        return 0
    ref, cand, build = argv[1], argv[2], argv[3]
    trials = int(argv[4]) if len(argv) > 4 else 5
    timing = int(argv[5]) if len(argv) > 5 else 100
    r = eval_kernel_against_ref(Path(ref).read_text(), Path(cand).read_text(), seed_num=42,
                                num_correct_trials=trials, num_perf_trials=timing, measure_performance=True,
                                build_dir=build, device=torch.device("cuda:0"))
    out = {"compiled": getattr(r, "compiled", None), "correctness": getattr(r, "correctness", None),
           "runtime_ms": getattr(r, "runtime", None), "seconds": time.monotonic() - t0} if r is not None else \
        {"compiled": None, "correctness": None, "runtime_ms": None, "seconds": time.monotonic() - t0}
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
