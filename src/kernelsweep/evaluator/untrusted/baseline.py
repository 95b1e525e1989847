"""Worker: time one execution mode of a reference (eager PyTorch or one
torch.compile mode) with the candidates' timing protocol. The first calls,
which compile, are warm-up and excluded; their duration is reported apart."""

from __future__ import annotations

import sys
import time
from typing import Any

import torch

from kernelsweep import taskcode
from kernelsweep.evaluator.untrusted import clock as timing
from kernelsweep.evaluator.untrusted import frame
from kernelsweep.evaluator.untrusted import machine, mathmodes, seeding, trees

COMPILE_MODES = {
    "inductor-default": None,
    "inductor-reduce-overhead": "reduce-overhead",
    "inductor-max-autotune": "max-autotune",
}
COMPILE_WARM_CALLS = 3  # reduce-overhead records its CUDA graph only after a few calls


def prepare(ctx: frame.WorkerContext) -> Any:
    """The host side, which needs no device: the reference module and its Model
    built under the init seed. Under the late claim it runs while the job
    before still times (frame.run), as the evaluation's reference worker does."""
    cfg = ctx.config
    mathmodes.use_strict()  # as the reference worker: fp32 without TF32
    ctx.phase("load")
    ref = taskcode.load_module(cfg["reference"], "kernelsweep_reference", register=True)
    init = seeding.make_init_inputs(ref, cfg["seeds"]["init"])
    seeding.set_seed(cfg["seeds"]["init"])
    model = ref.Model(*init)
    if cfg["mode"] != "eager":
        ctx.phase("import compiler")  # a second or two of imports, not on the held device
        import torch._dynamo  # noqa: F401
        import torch._inductor.compile_fx  # noqa: F401
        if cfg.get("await_go"):  # else the device is already held: inductor starts them beside its compile
            _start_compile_workers()
    return ref, model


def _start_compile_workers() -> None:
    """Inductor starts its pool of compile processes at the first compile, on
    the held device; started and waited for before the late claim they cost
    host time only, and the first compiled call holds the device for less
    (docs/decisions/2026-12-03-baseline-modes.md)."""
    try:
        from torch._inductor.async_compile import AsyncCompile
        AsyncCompile.warm_pool()
        AsyncCompile.wait_pool_ready()
    except Exception as exc:  # noqa: BLE001 - an inductor without these or a pool that cannot start: the compile starts its own
        print(f"inductor's compile workers were not started ahead: {type(exc).__name__}: {exc}", file=sys.stderr)


def body(ctx: frame.WorkerContext, prepared: Any) -> dict[str, Any]:
    cfg = ctx.config
    precision, seeds, mode = cfg["precision"], cfg["seeds"], cfg["mode"]
    ref, model = prepared
    ctx.phase("device")
    stage_s: dict[str, float] = {}  # where the held time goes (the parent's record of this mode)
    mark = time.perf_counter()

    def spent(stage: str) -> None:
        nonlocal mark
        now = time.perf_counter()
        stage_s[stage] = round(now - mark, 3)
        mark = now

    device = machine.resolve_device(cfg["device"])
    info = machine.device_info(device)
    clock = timing.Clock(device, info.get("llc_bytes") or info.get("l2_bytes"))
    model = model.to(device)
    if precision != "fp32":
        model = model.to(seeding.DTYPES[precision])
    first = seeding.make_inputs(ref, seeds["timing_base"], precision, device)
    wanted = cfg["warmup"] + cfg["timing_trials"]
    n_sets = timing.pool_size(trees.tree_nbytes(first), wanted, cfg["pool_bytes"])
    spent("device")  # context, model on the device
    pool = [first] + [seeding.make_inputs(ref, seeds["timing_base"] + j, precision, device)
                      for j in range(1, n_sets)]
    machine.synchronize(device)
    spent("inputs")

    fn = model
    compile_s = None
    if mode != "eager":
        ctx.phase("compile")
        fn = torch.compile(model, mode=COMPILE_MODES[mode])
        t0 = time.perf_counter()
        with torch.no_grad():
            for k in range(COMPILE_WARM_CALLS):
                fn(*pool[k % len(pool)])
            machine.synchronize(device)
        compile_s = time.perf_counter() - t0
        spent("compile")
    ctx.phase("timing")
    samples = timing.interleaved([fn], pool, clock=clock, warmup=cfg["warmup"], trials=cfg["timing_trials"])
    spent("timing")
    return {"samples": samples[0], "compile_s": compile_s, "pool_sets": n_sets,
            "device_info": info, "stage_s": stage_s}


if __name__ == "__main__":
    frame.run(body, prepare)
