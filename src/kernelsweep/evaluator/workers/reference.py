"""Worker: the reference, alone in its process (no candidate code ever runs
here). It holds what the candidate is judged against, in a directory the
candidate's worker cannot see.

Setup: the device, the reference module, Model under the public init seed
(its init inputs and weights go to the shared directory, read-only for the
candidate), then the correctness trials on the evaluation's secret seeds,
their outputs saved privately; whether those outputs are constant, near
zero, or so small that zeros would pass the tolerance (degenerate).
Then the shape variants (kernelsweep.shapes): the module executed again with
its size constants replaced, Model built from that variant's init inputs
under the same seed (init inputs and weights to the shared directory), one
call on the variant's secret seed, its output saved privately; a variant the
reference cannot run (an exception, out of memory, inputs beyond the budget)
is dropped with the reason. fp32 runs with TF32 off (mathmodes.use_strict).
Commands: `warmup`, `block` (time the reference on the inputs of the
block's seeds, made on the device first), `outputs` (save the reference's
outputs for given seeds, sampled as the candidate's are, to verify the
candidate's timed outputs)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelsweep import shapes, taskcode
from kernelsweep.evaluator import compare
from kernelsweep.evaluator.workers import frame, machine, mathmodes, seeding, trees
from kernelsweep.evaluator.workers.clock import Clock

# Rescaled probe: far from the trial inputs' scale, same positions.
PROBE_SCALE, PROBE_SHIFT = 1000.0, 3.0


class State:
    pass


def saved_output(out: Any) -> dict[str, Any]:
    structure, leaves = trees.flatten_output(out)
    return {"structure": structure, "leaves": trees.portable_leaves(leaves)}


def setup(ctx: frame.WorkerContext) -> State:
    cfg = ctx.config
    s = State()
    s.private, shared = Path(cfg["private_dir"]), Path(cfg["shared_dir"])
    s.precision = cfg["precision"]
    atol, rtol = cfg["atol"], cfg["rtol"]
    ctx.phase("device")
    s.device = machine.resolve_device(cfg["device"])
    info = machine.device_info(s.device)
    s.clock = Clock(s.device, info.get("llc_bytes") or info.get("l2_bytes"))
    mathmodes.use_strict()
    ctx.phase("load")
    s.ref = taskcode.load_module(cfg["reference"], "kernelsweep_reference", register=True)
    for name in ("Model", "get_inputs"):
        if not hasattr(s.ref, name):
            raise frame.InterfaceProblem(f"the reference defines no {name}")
    init_seed = cfg["init_seed"]
    init = seeding.make_init_inputs(s.ref, init_seed)
    trees.save(init, shared / "init.pt")
    seeding.set_seed(init_seed)
    model = s.ref.Model(*init)
    trees.save({k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}, shared / "state.pt")
    model = model.to(s.device)
    if s.precision != "fp32":
        model = model.to(seeding.DTYPES[s.precision])
    s.model = model

    def run_case(inputs: list, seed: int, name: str) -> dict[str, Any]:
        pristine = trees.clone_tree(inputs)
        seeding.set_seed(seed)
        out = model(*inputs)
        machine.synchronize(s.device)
        _, leaves = trees.flatten_output(out)
        saved = saved_output(out)
        trees.save(saved, s.private / f"{name}.pt")
        return {"name": name, "file": f"{name}.pt", "mutates_inputs": not trees.same_values(inputs, pristine),
                "aliases_inputs": trees.aliases(leaves, inputs), "output_bytes": trees.tree_nbytes(leaves),
                "_saved": saved}

    ctx.phase("trials")
    trials = []
    with torch.no_grad():
        for i, seed in enumerate(cfg["trial_seeds"]):
            trials.append(dict(run_case(seeding.make_inputs(s.ref, seed, s.precision, s.device), seed,
                                        f"trial{i}"), seed=seed))
        first = trials[0]["_saved"]
        varies = any(not compare.compare_outputs(first, t["_saved"], atol, rtol)["ok"] for t in trials[1:])
        near_zero = all(compare.max_magnitude(t["_saved"]) <= atol for t in trials)
        constant = (len(trials) > 1 and not varies) or near_zero
        degenerate = all(compare.zeros_would_pass(t["_saved"], atol, rtol) for t in trials)
        probes = []
        if constant:
            ctx.phase("probes")
            base = seeding.make_inputs(s.ref, trials[0]["seed"], s.precision, s.device)
            for kind in ("nan", "scaled"):
                probe = trees.map_tensors(base, lambda t, k=kind: (
                    t if not t.is_floating_point() else
                    torch.full_like(t, float("nan")) if k == "nan" else t * PROBE_SCALE + PROBE_SHIFT))
                trees.save(probe, Path(cfg["shared_dir"]) / f"probe_{kind}_in.pt")
                probes.append(dict(run_case(probe, trials[0]["seed"], f"probe_{kind}"), seed=trials[0]["seed"],
                                   inputs=f"probe_{kind}_in.pt"))
    for case in trials + probes:
        case.pop("_saved")
    input_bytes = trees.tree_nbytes(seeding.make_inputs(s.ref, trials[0]["seed"], s.precision, s.device))
    ctx.phase("variants")
    variants = [run_variant(s, cfg, v, input_bytes) for v in cfg.get("variants") or []]
    s.ready = {"trials": trials, "probes": probes, "variants": variants, "constant": constant, "near_zero": near_zero,
               "degenerate": degenerate, "device_info": info, "input_bytes": input_bytes}
    return s


def run_variant(s: State, cfg: dict[str, Any], variant: dict[str, Any], task_bytes: int) -> dict[str, Any]:
    """One shape variant on the reference: {name, file, seed, constants, ...} or
    {name, dropped: reason}. When the reference cannot run every size
    rescaled (a channel count no longer divisible by its groups, a width
    by its heads), the variant is tried once more with only its batch-like
    constants rescaled (shapes.batch_only); `narrowed` then says why."""
    result = _try_variant(s, cfg, variant["name"], variant["constants"], variant["seed"], task_bytes)
    batch = shapes.batch_only(variant["constants"])
    if result.get("dropped") and batch and batch != variant["constants"]:
        again = _try_variant(s, cfg, variant["name"], batch, variant["seed"], task_bytes)
        if not again.get("dropped"):
            return dict(again, narrowed=result["dropped"])
    return result


def _try_variant(s: State, cfg: dict[str, Any], name: str, constants: dict[str, int], seed: int,
                 task_bytes: int) -> dict[str, Any]:
    shared = Path(cfg["shared_dir"])
    model = inputs = out = None
    try:
        module = taskcode.load_module(cfg["reference"], f"kernelsweep_reference_{name}", register=True,
                                      constants=constants)
        init = seeding.make_init_inputs(module, cfg["init_seed"])
        seeding.set_seed(cfg["init_seed"])
        model = module.Model(*init)
        state = {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}
        model = model.to(s.device)
        if s.precision != "fp32":
            model = model.to(seeding.DTYPES[s.precision])
        with torch.no_grad():
            inputs = seeding.make_inputs(module, seed, s.precision, s.device)
            size = trees.tree_nbytes(inputs)
            if size > max(task_bytes, cfg.get("variant_bytes") or 0):
                return {"name": name, "dropped": f"its inputs ({size} bytes) exceed the variant budget "
                                                 f"({cfg.get('variant_bytes')} bytes)"}
            pristine = trees.clone_tree(inputs)
            seeding.set_seed(seed)
            out = model(*inputs)
            machine.synchronize(s.device)
            _, leaves = trees.flatten_output(out)
            trees.save(saved_output(out), s.private / f"{name}.pt")
            signals = {"mutates_inputs": not trees.same_values(inputs, pristine),
                       "aliases_inputs": trees.aliases(leaves, inputs)}
        trees.save(init, shared / f"{name}_init.pt")
        trees.save(state, shared / f"{name}_state.pt")
        return {"name": name, "file": f"{name}.pt", "seed": seed, "constants": constants, **signals}
    except (Exception, MemoryError) as exc:  # noqa: BLE001 - the reference cannot run this shape
        return {"name": name, "dropped": f"the reference fails: {type(exc).__name__}: {str(exc)[:300]}"}
    finally:
        del model, inputs, out
        if s.device.type == "cuda":
            torch.cuda.empty_cache()


def _inputs(s: State, seed: int) -> list:
    return seeding.make_inputs(s.ref, seed, s.precision, s.device)


def warmup(ctx: frame.WorkerContext, s: State, seeds: list[int]) -> dict[str, Any]:
    with torch.no_grad():
        s.clock.block(s.model, [_inputs(s, seed) for seed in seeds])
    return {}


def block(ctx: frame.WorkerContext, s: State, seeds: list[int], synchronized: bool = False) -> dict[str, Any]:
    with torch.no_grad():
        ms = s.clock.block(s.model, [_inputs(s, seed) for seed in seeds], synchronized=synchronized)
    return {"ms": ms}


def outputs(ctx: frame.WorkerContext, s: State, seeds: list[int], names: list[str],
            sample_seed: int) -> dict[str, Any]:
    """The reference's outputs on the inputs of these timing seeds, sampled
    at the same positions as the candidate's (trees.sampled_output)."""
    with torch.no_grad():
        for seed, name in zip(seeds, names):
            out = s.model(*_inputs(s, seed))
            machine.synchronize(s.device)
            trees.save(trees.sampled_output(*trees.flatten_output(out), sample_seed), s.private / name)
    return {}


if __name__ == "__main__":
    frame.serve(setup, {"warmup": warmup, "block": block, "outputs": outputs})
