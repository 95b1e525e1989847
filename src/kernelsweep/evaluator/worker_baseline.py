"""Worker: time one execution mode of a reference (eager PyTorch or one
torch.compile mode) with the candidates' timing protocol. The first calls,
which compile, are warm-up and excluded; their duration is reported apart."""

from __future__ import annotations

import time
from typing import Any

import torch

from kernelsweep.evaluator import harness, timing, workerlib

COMPILE_MODES = {
    "inductor-default": None,
    "inductor-reduce-overhead": "reduce-overhead",
    "inductor-max-autotune": "max-autotune",
}
COMPILE_WARM_CALLS = 3  # reduce-overhead records its CUDA graph only after a few calls


def body(ctx: workerlib.WorkerContext) -> dict[str, Any]:
    cfg = ctx.config
    precision, seeds, mode = cfg["precision"], cfg["seeds"], cfg["mode"]
    ctx.phase("device")
    device = harness.resolve_device(cfg["device"])
    info = harness.device_info(device)
    clock = timing.Clock(device, info.get("llc_bytes") or info.get("l2_bytes"))
    ctx.phase("load")
    ref = harness.load_module(cfg["reference"], "kernelsweep_reference", register=True)
    init = harness.make_init_inputs(ref, seeds["init"])
    harness.set_seed(seeds["init"])
    model = ref.Model(*init).to(device)
    if precision != "fp32":
        model = model.to(harness.DTYPES[precision])
    first = harness.make_inputs(ref, seeds["timing_base"], precision)
    wanted = cfg["warmup"] + cfg["timing_trials"]
    n_sets = timing.pool_size(harness.tree_nbytes(first), wanted, cfg["pool_bytes"])
    pool = [first] + [harness.make_inputs(ref, seeds["timing_base"] + j, precision) for j in range(1, n_sets)]
    pool = [harness.to_device(p, device) for p in pool]

    fn = model
    compile_s = None
    if mode != "eager":
        ctx.phase("compile")
        fn = torch.compile(model, mode=COMPILE_MODES[mode])
        t0 = time.perf_counter()
        with torch.no_grad():
            for k in range(COMPILE_WARM_CALLS):
                fn(*pool[k % len(pool)])
            harness.synchronize(device)
        compile_s = time.perf_counter() - t0
    ctx.phase("timing")
    samples = timing.interleaved([fn], pool, clock=clock, warmup=cfg["warmup"], trials=cfg["timing_trials"])
    return {"samples": samples[0], "compile_s": compile_s, "pool_sets": n_sets,
            "device_info": info}


if __name__ == "__main__":
    workerlib.run(body)
