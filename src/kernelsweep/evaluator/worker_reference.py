"""Worker: run the reference alone and write what the candidate is judged
against. No candidate code exists in this process.

Writes into the evaluation's work directory: init.pt (get_init_inputs under
the init seed), state.pt (Model's weights), in_{i}.pt (trial i's inputs, drawn
under its own seed, already in the evaluation precision), ref_{i}.pt (the
outputs), and, when the reference's output does not vary across trials or is
near zero, probe inputs and outputs (all-NaN inputs, rescaled inputs) that
show whether a candidate's output depends on its inputs at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from kernelsweep.evaluator import compare, harness, workerlib

# Rescaled probe: far from the trial inputs' scale, same positions.
PROBE_SCALE, PROBE_SHIFT = 1000.0, 3.0


def _probe_inputs(inputs: list, kind: str) -> list:
    def change(t: torch.Tensor) -> torch.Tensor:
        if not t.is_floating_point():
            return t
        if kind == "nan":
            return torch.full_like(t, float("nan"))
        return t * PROBE_SCALE + PROBE_SHIFT

    return harness.map_tensors(inputs, change)


def body(ctx: workerlib.WorkerContext) -> dict[str, Any]:
    cfg = ctx.config
    work = Path(cfg["workdir"])
    precision = cfg["precision"]
    atol, rtol = cfg["atol"], cfg["rtol"]
    ctx.phase("device")
    device = harness.resolve_device(cfg["device"])
    info = harness.device_info(device)
    ctx.phase("load")
    ref = harness.load_module(cfg["reference"], "kernelsweep_reference", register=True)
    for name in ("Model", "get_inputs"):
        if not hasattr(ref, name):
            raise workerlib.InterfaceProblem(f"the reference defines no {name}")
    init_seed = cfg["seeds"]["init"]
    init = harness.make_init_inputs(ref, init_seed)
    harness.save(init, work / "init.pt")
    harness.set_seed(init_seed)
    model = ref.Model(*init)
    harness.save({k: v.detach().to("cpu").clone() for k, v in model.state_dict().items()}, work / "state.pt")
    model = model.to(device)
    if precision != "fp32":
        model = model.to(harness.DTYPES[precision])

    def run_case(inputs: list, seed: int, stem: str) -> dict[str, Any]:
        harness.save(inputs, work / f"{stem}_in.pt")
        dev = harness.to_device(inputs, device)
        pristine = harness.clone_tree(dev)
        harness.set_seed(seed)
        out = model(*dev)
        harness.synchronize(device)
        structure, leaves = harness.flatten_output(out)
        saved = {"structure": structure, "leaves": harness.portable_leaves(leaves)}
        harness.save(saved, work / f"{stem}_ref.pt")
        return {"seed": seed, "inputs": f"{stem}_in.pt", "reference": f"{stem}_ref.pt",
                "mutates_inputs": not harness.same_values(dev, pristine),
                "aliases_inputs": harness.aliases(leaves, dev),
                "output_bytes": harness.tree_nbytes(leaves),
                "input_bytes": harness.tree_nbytes(inputs), "_saved": saved}

    ctx.phase("trials")
    trials = []
    with torch.no_grad():
        for i, seed in enumerate(cfg["trial_seeds"]):
            inputs = harness.make_inputs(ref, seed, precision)
            trials.append(run_case(inputs, seed, f"trial{i}"))
        first = trials[0]["_saved"]
        varies = any(not compare.compare_outputs(first, t["_saved"], atol, rtol)["ok"] for t in trials[1:])
        near_zero = all(compare.max_magnitude(t["_saved"]) <= atol for t in trials)
        constant = (len(trials) > 1 and not varies) or near_zero
        probes = []
        if constant:
            ctx.phase("probes")
            base = harness.load(work / trials[0]["inputs"])
            for kind in ("nan", "scaled"):
                case = run_case(_probe_inputs(base, kind), trials[0]["seed"], f"probe_{kind}")
                case["name"] = kind
                probes.append(case)
    for case in trials + probes:
        case.pop("_saved")
    return {
        "trials": trials,
        "probes": probes,
        "init": "init.pt",
        "state": "state.pt",
        "constant": constant,
        "near_zero": near_zero,
        "device_info": info,
    }


if __name__ == "__main__":
    workerlib.run(body)
