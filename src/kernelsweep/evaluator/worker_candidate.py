"""Worker: import the candidate (building its extensions), then, once the
parent says the reference is done, construct ModelNew with the reference's
init inputs and weights, run every correctness trial on the reference
worker's saved inputs and write the outputs for the parent to compare, and
observe which kernels one forward call launches.

The reference module is never imported here: inputs, init inputs and weights
come from files, so nothing the candidate does can change what it is judged
on. Per trial the worker also records the dynamic cheat signals: inputs
mutated, an output aliasing an input, an output sharing memory with an
earlier (still alive) output, and an output that kept changing after forward
returned (work left running on another stream or thread)."""

from __future__ import annotations

import inspect
import os
import time
from pathlib import Path
from typing import Any

import torch

from kernelsweep.evaluator import harness, kernels, workerlib
from kernelsweep.evaluator.buildhooks import BuildHooks

_QUIESCE_S = 0.5


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _settle(device: torch.device, threads_before: int) -> None:
    """Full device synchronize; on the CPU, give threads the call started a
    moment to finish (the CPU analogue of work left on a side stream)."""
    if device.type == "cuda":
        harness.synchronize(device)
        return
    deadline = time.monotonic() + _QUIESCE_S
    while _thread_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.01)


def check_interface(model_cls: Any) -> None:
    if model_cls is None:
        raise workerlib.InterfaceProblem("the candidate defines no ModelNew")
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise workerlib.InterfaceProblem("ModelNew is not a torch.nn.Module subclass")
    if model_cls.forward is torch.nn.Module.forward:
        raise workerlib.InterfaceProblem("ModelNew does not define forward")


def check_call(fn: Any, args: list, what: str) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # not introspectable (a builtin): let the call decide
    try:
        signature.bind(*args)
    except TypeError as exc:
        raise workerlib.InterfaceProblem(
            f"{what} does not accept the reference's {len(args)} argument(s): {exc}") from None


def build_candidate(model_cls: type, init: list, state: dict, seed: int, device: torch.device,
                    precision: str) -> tuple[torch.nn.Module, int]:
    """ModelNew under the same seed as Model, then the reference's weights
    copied in wherever a name and shape match."""
    harness.set_seed(seed)
    model = model_cls(*init)
    own = model.state_dict()
    matched = {k: v for k, v in state.items() if k in own and tuple(own[k].shape) == tuple(v.shape)}
    if matched:
        model.load_state_dict(matched, strict=False)
    model = model.to(device)
    if precision != "fp32":
        model = model.to(harness.DTYPES[precision])
    return model, len(matched)


def body(ctx: workerlib.WorkerContext) -> dict[str, Any]:
    cfg = ctx.config
    work = Path(cfg["workdir"])
    ctx.phase("device")
    device = harness.resolve_device(cfg["device"])
    ctx.hooks = BuildHooks(cfg["build_root"], ctx.channel, cfg.get("cuda_arch")).install()
    guard = harness.Guard()
    settings_before = harness.GlobalSettings.capture()
    ctx.candidate_file = str(Path(cfg["candidate"]).resolve())

    ctx.phase("import")
    candidate = harness.load_module(ctx.candidate_file, "kernelsweep_candidate", register=True)
    ctx.phase("imported")
    manifest = ctx.channel.wait_for_go()
    if manifest is None:
        workerlib.finish(0)

    model_cls = getattr(candidate, "ModelNew", None)
    check_interface(model_cls)
    init = harness.load(work / manifest["init"])
    state = harness.load(work / manifest["state"])
    check_call(model_cls, init, "ModelNew(...)")
    ctx.phase("construct")
    model, copied = build_candidate(model_cls, init, state, cfg["seeds"]["init"], device, cfg["precision"])

    cases = [dict(c, name=f"trial{i}") for i, c in enumerate(manifest["trials"])]
    cases += [dict(c, name=f"probe_{c['name']}") for c in manifest.get("probes", [])]
    trials: list[dict[str, Any]] = []
    alive: list[list[torch.Tensor]] = []  # every output stays alive, so reuse of its memory is visible
    ctx.phase("trials")
    with torch.no_grad():
        for i, case in enumerate(cases):
            inputs = harness.to_device(harness.load(work / case["inputs"]), device)
            pristine = harness.clone_tree(inputs)
            if i == 0:
                check_call(model.forward, inputs, "ModelNew.forward")
            threads = _thread_count()
            harness.set_seed(case["seed"])
            out = model(*inputs)
            structure, leaves = harness.flatten_output(out)
            at_return = [x.clone() if isinstance(x, torch.Tensor) else x for x in leaves]
            _settle(device, threads)
            spans = [harness.storage_span(t) for t in harness.tensors_in(leaves)]
            reused = any(s and s[1] > s[0] and any(p and p[0] < s[1] and s[0] < p[1]
                                                  for old in alive for p in map(harness.storage_span, old))
                         for s in spans)
            result = {
                "name": case["name"],
                "output": f"{case['name']}_cand.pt",
                "mutates_inputs": not harness.same_values(inputs, pristine),
                "aliases_inputs": harness.aliases(leaves, inputs),
                "reuses_earlier_output": reused,
                "changed_after_return": not harness.same_values(at_return, leaves),
                "on_device": all(t.device.type == device.type for t in harness.tensors_in(leaves)),
            }
            harness.save({"structure": structure, "leaves": harness.portable_leaves(leaves)},
                         work / result["output"])
            alive.append(harness.tensors_in(leaves))
            trials.append(result)
            del out, at_return

    ctx.phase("detect")
    first = harness.to_device(harness.load(work / cases[0]["inputs"]), device)
    names = cfg.get("kernel_names", [])

    def one_call() -> None:
        with torch.no_grad():
            model(*harness.clone_tree(first))

    launch = kernels.observe(one_call, device=device, extension_modules=ctx.hooks.module_names,
                             kernel_names=names, op_namespaces=cfg.get("op_namespaces", []))
    return {
        "trials": trials,
        "launch": launch,
        "state_copied": copied,
        "patched_harness": guard.patched_harness(),
        "patched_torch": guard.patched_torch(),
        "settings_changed": settings_before.differences(harness.GlobalSettings.capture()),
        **ctx.extras(),
    }


if __name__ == "__main__":
    workerlib.run(body)
