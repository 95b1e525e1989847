"""Worker: time one execution mode of a reference (eager PyTorch, a torch.compile
mode, CUDA-graph replay or cuDNN benchmark mode) with the candidates' timing
protocol. Every mode but the unpaired ones (settings.UNPAIRED_MODES) is timed
interleaved with eager PyTorch on the same inputs in this process, so its
ratio to eager carries no drift between processes; both sets of samples are
returned. The first calls, which compile, capture or search, are warm-up and
excluded; their duration is reported apart."""

from __future__ import annotations

import sys
import time
from typing import Any

import torch

from kernelsweep.runtime import taskcode
from kernelsweep.evaluator import settings
from kernelsweep.evaluator.untrusted import clock as timing
from kernelsweep.evaluator.untrusted import frame
from kernelsweep.evaluator.untrusted import machine, mathmodes, seeding, trees

COMPILE_MODES = {  # settings.COMPILE_MODES -> torch.compile's mode argument
    "inductor-default": None,
    "inductor-reduce-overhead": "reduce-overhead",
    "inductor-max-autotune": "max-autotune",
}
COMPILE_WARM_CALLS = 3  # reduce-overhead records its CUDA graph only after a few calls
assert set(COMPILE_MODES) == set(settings.COMPILE_MODES)


def prepare(ctx: frame.WorkerContext) -> Any:
    """The host side, which needs no device: the reference module and its Model
    built under the init seed. Under the late claim it runs while the job
    before still times (frame.run), as the evaluation's reference worker does."""
    cfg = ctx.config
    mathmodes.use_strict()  # as the reference worker: fp32 without TF32
    ctx.phase("load")
    ref = taskcode.load_module(cfg["reference"], "kernelsweep_reference", register=True)
    init = seeding.make_init_inputs(ref, cfg["seeds"]["init"])
    model = seeding.construct(ref.Model, init, cfg["seeds"]["init"])
    if cfg["mode"] in COMPILE_MODES:
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

    fn, compile_s = model, None
    if mode != "eager":
        ctx.phase("compile" if mode in COMPILE_MODES else "prepare " + mode)
        t0 = time.perf_counter()
        with torch.no_grad():
            fn = _prepare_mode(mode, model, pool, device)
            machine.synchronize(device)
        compile_s = time.perf_counter() - t0
        spent("compile")
    ctx.phase("timing")
    calls = [fn] if mode in settings.UNPAIRED_MODES else [model, fn]  # eager first: samples[0]
    samples = timing.interleaved(calls, pool, clock=clock, warmup=cfg["warmup"], trials=cfg["timing_trials"])
    spent("timing")
    return {"samples": samples[-1], "eager_samples": samples[0] if len(calls) == 2 else None,
            "compile_s": compile_s, "pool_sets": n_sets, "device_info": info, "stage_s": stage_s}


def _prepare_mode(mode: str, model: Any, pool: list[list], device: torch.device) -> Any:
    """The callable that runs `mode`, after the calls that compile, capture or search
    (under no_grad, as the timing)."""
    if mode in COMPILE_MODES:
        fn = torch.compile(model, mode=COMPILE_MODES[mode])
        for k in range(COMPILE_WARM_CALLS):
            fn(*pool[k % len(pool)])
        return fn
    if device.type != "cuda":  # the parent skips these on the CPU (baseline.CPU_SKIPS)
        raise RuntimeError(f"{mode} needs a CUDA device")
    if mode == "cudnn-benchmark":
        # For the whole process: cuDNN caches one algorithm per convolution, whatever the flag was
        # when it chose, so this mode is never paired with eager (settings.UNPAIRED_MODES). TF32
        # stays off (mathmodes.use_strict): only the choice among fp32 algorithms changes.
        torch.backends.cudnn.benchmark = True
        for k in range(COMPILE_WARM_CALLS):  # the first call of each shape runs the search
            model(*pool[k % len(pool)])
        return model
    if mode == "cuda-graph":
        return _graphed(model, pool, device)
    raise ValueError(f"unknown baseline mode {mode!r}")


def _graphed(model: Any, pool: list[list], device: torch.device) -> Any:
    """The forward captured in one CUDA graph per input set of the pool, each graph
    reading its own set's tensors where they lie (its static inputs); a call replays
    the graph of the set it is given. So no input is copied: a single graph would
    need each call's inputs copied into its buffers, a pass over the inputs that
    eager, the candidates and torch.compile's default mode never make (reduce-overhead
    does copy; that is its own mode). The graphs share one memory pool (they never
    run at once) and their outputs are dropped (timing reads none)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):  # lazy initialisation (cuBLAS handles, workspaces) before any capture
        for k in range(COMPILE_WARM_CALLS):
            model(*pool[k % len(pool)])
    torch.cuda.current_stream(device).wait_stream(side)
    shared = torch.cuda.graph_pool_handle()
    graphs = {}
    for args in pool:
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=shared):
            model(*args)
        graphs[tuple(map(id, args))] = graph

    def replay(*args: Any) -> None:
        graphs[tuple(map(id, args))].replay()

    return replay


if __name__ == "__main__":
    frame.run(body, prepare)
