"""Worker: time the reference and the candidate, interleaved, in one process
on one device. The only process where both are loaded.

Order matters: the clock, the guard and the reference (module, weights, the
whole pool of timing inputs) are set up before the candidate is imported, so
the reference's inputs and sizes come from the reference file alone. After
the candidate is imported and again after timing, the worker checks that the
reference module, the harness's functions and torch's namespaces are as they
were. The reference runs under the harness's global torch settings and the
candidate under its own. The candidate's outputs during timing are checked for
returned-again tensors, and one final pair of outputs is saved so the parent
can confirm the candidate still computes the right thing while timed."""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any

import torch

from kernelsweep.evaluator import harness, timing, workerlib
from kernelsweep.evaluator.buildhooks import BuildHooks
from kernelsweep.evaluator.worker_candidate import build_candidate, check_interface

_KEEP_ALIVE = 2  # recent candidate outputs held, so their memory cannot be handed out again


def body(ctx: workerlib.WorkerContext) -> dict[str, Any]:
    cfg = ctx.config
    work = Path(cfg["workdir"])
    precision = cfg["precision"]
    seeds = cfg["seeds"]
    ctx.phase("device")
    device = harness.resolve_device(cfg["device"])
    clock = timing.Clock(device, cfg.get("cache_bytes"))
    ctx.hooks = BuildHooks(cfg["build_root"], ctx.channel, cfg.get("cuda_arch")).install()
    guard = harness.Guard()
    ref_settings = harness.GlobalSettings.capture()

    ctx.phase("reference")
    ref = harness.load_module(cfg["reference"], "_kernelsweep_private_reference", register=False)
    ref_print = harness.module_fingerprint(ref)
    init = harness.make_init_inputs(ref, seeds["init"])
    harness.set_seed(seeds["init"])
    ref_model = ref.Model(*init)
    state = {k: v.detach().to("cpu").clone() for k, v in ref_model.state_dict().items()}
    ref_model = ref_model.to(device)
    if precision != "fp32":
        ref_model = ref_model.to(harness.DTYPES[precision])
    first = harness.make_inputs(ref, seeds["timing_base"], precision)
    wanted = cfg["warmup"] + cfg["timing_trials"]
    n_sets = timing.pool_size(harness.tree_nbytes(first), wanted, cfg["pool_bytes"])
    pool = [first] + [harness.make_inputs(ref, seeds["timing_base"] + j, precision) for j in range(1, n_sets)]

    ctx.candidate_file = str(Path(cfg["candidate"]).resolve())
    ctx.phase("import")
    candidate = harness.load_module(ctx.candidate_file, "kernelsweep_candidate", register=True)
    ctx.phase("construct")
    model_cls = getattr(candidate, "ModelNew", None)
    check_interface(model_cls)
    model, _ = build_candidate(model_cls, init, state, seeds["init"], device, precision)
    cand_settings = harness.GlobalSettings.capture()
    pool = [harness.to_device(p, device) for p in pool]
    tampered_after_import = harness.fingerprint_changes(ref_print, ref)

    recent: list[Any] = []
    returned: dict[int, weakref.ref] = {}
    cached = {"same_object": False, "same_memory": False}

    def before(j: int) -> None:
        (ref_settings if j == 0 else cand_settings).apply()

    def after(j: int, out: Any) -> None:
        if j != 1:
            return
        tensors = harness.tensors_in(out)
        for t in tensors:
            old = returned.get(id(t))
            if old is not None and old() is t:
                cached["same_object"] = True
            try:
                returned[id(t)] = weakref.ref(t)
            except TypeError:
                pass
            s = harness.storage_span(t)
            if s and s[1] > s[0]:
                for prev in recent:
                    for p in map(harness.storage_span, prev):
                        if p and p[0] < s[1] and s[0] < p[1]:
                            cached["same_memory"] = True
        recent.append(tensors)
        del recent[:-_KEEP_ALIVE]

    ctx.phase("timing")
    samples = timing.interleaved([ref_model, model], pool, clock=clock, warmup=cfg["warmup"],
                                 trials=cfg["timing_trials"], before=before, after=after)
    recent.clear()

    ctx.phase("check")
    with torch.no_grad():
        ref_settings.apply()
        ref_out = ref_model(*harness.clone_tree(pool[0]))
        harness.synchronize(device)
        structure, leaves = harness.flatten_output(ref_out)
        harness.save({"structure": structure, "leaves": harness.portable_leaves(leaves)}, work / "timing_ref.pt")
        cand_settings.apply()
        cand_out = model(*harness.clone_tree(pool[0]))
        harness.synchronize(device)
        structure, leaves = harness.flatten_output(cand_out)
        harness.save({"structure": structure, "leaves": harness.portable_leaves(leaves)}, work / "timing_cand.pt")
        output_bytes = harness.tree_nbytes(leaves)
    ref_settings.apply()

    return {
        "ref_ms": samples[0],
        "cand_ms": samples[1],
        "pool_sets": n_sets,
        "flush_bytes": clock.flush_bytes,
        "output_bytes": output_bytes,
        "cached_output": cached["same_object"] or cached["same_memory"],
        "reference_tampered": sorted(set(tampered_after_import) | set(harness.fingerprint_changes(ref_print, ref))),
        "patched_harness": guard.patched_harness(),
        "patched_torch": guard.patched_torch(),
        "settings_changed": ref_settings.differences(cand_settings),
        "check_outputs": ["timing_ref.pt", "timing_cand.pt"],
        **ctx.extras(),
    }


if __name__ == "__main__":
    workerlib.run(body)
