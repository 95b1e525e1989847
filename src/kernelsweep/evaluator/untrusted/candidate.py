"""Worker: the candidate, confined (see untrusted/launch.py), driven command by
command by the parent. Its process never sees the reference's outputs, the
evaluation's secret seeds before it is given them, or any other worker.

Preparation, on the host (before the device is taken, under the late claim):
the build hooks (builds go to the candidate's own build directory; every
extension module comes back through the perturber), the guard snapshot, the
candidate module imported (loading what it built), and under the late claim
ModelNew built, for the task's shape and for each shape variant the reference
built ahead. The device is set up by the harness before any candidate code
uses it (take_device). Commands:
- construct: ModelNew from the reference's init inputs (a file in the
  shared, read-only directory) under the same seed as Model, as KernelBench
  builds it: nothing is copied into it afterwards, so weights it folds or
  reshapes in __init__ are its own; moved to the device (built already when
  the preparation built it); the digests of its weights, for the record;
- trials: one call per secret seed, inputs made here on the device from the
  reference's get_inputs; outputs saved for the parent, with the dynamic
  signals (inputs mutated or aliased, an output's storage reused, changed
  after return, not a plain dense tensor); one call, chosen by the parent, runs
  with the extension's results perturbed;
- variant: one call on a shape variant (kernelsweep.core.shapes): the reference
  module executed with the variant's size constants, and the candidate's too
  where it assigns them as the reference does; ModelNew built from the
  variant's init inputs (in the preparation, where the reference built the
  variant ahead); the task-shape model stays the timed one;
- clock: the timing clock, flushing as many bytes as the reference's;
- warmup / block / save: warm-up calls, timed blocks (inputs made from the
  block's secret seeds first, each output cloned right after its end event;
  the parent picks which to check only after the block), and the chosen
  clones saved;
- report: what the candidate patched, the settings it changed, which
  kernels ran (profiler) and how often each extension function was called."""

from __future__ import annotations

import inspect
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from kernelsweep.core import shapes
from kernelsweep.runtime import taskcode
from kernelsweep.evaluator import settings
from kernelsweep.evaluator.untrusted import (devicehandoff, frame, guard, hooks, kernels, machine, mathmodes,
                                          outputfiles, seeding, trees)
from kernelsweep.evaluator.untrusted.buildhooks import BuildHooks
from kernelsweep.evaluator.untrusted.clock import Clock
from kernelsweep.evaluator.untrusted import perturb
from kernelsweep.evaluator.untrusted.perturb import Perturber, cpu_ns

_QUIESCE_S = 0.5


class State:
    pass


def _thread_count() -> int:
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return 0


def _settle(device: torch.device, threads_before: int) -> None:
    """Full device synchronize; on the CPU, give threads the call started a
    moment to finish (the CPU analogue of work left on a side stream)."""
    if device.type == "cuda":
        machine.synchronize(device)
        return
    deadline = time.monotonic() + _QUIESCE_S
    while _thread_count() > threads_before and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.01)


def check_interface(model_cls: Any) -> None:
    if model_cls is None:
        raise frame.InterfaceProblem("the candidate defines no ModelNew")
    if not (isinstance(model_cls, type) and issubclass(model_cls, torch.nn.Module)):
        raise frame.InterfaceProblem("ModelNew is not a torch.nn.Module subclass")
    if model_cls.forward is torch.nn.Module.forward:
        raise frame.InterfaceProblem("ModelNew does not define forward")


def check_call(fn: Any, args: list, what: str) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # not introspectable (a builtin): let the call decide
    try:
        signature.bind(*args)
    except TypeError as exc:
        raise frame.InterfaceProblem(
            f"{what} does not accept the reference's {len(args)} argument(s): {exc}") from None


def _harness_tensor_work(folder: Path) -> None:
    """What the harness does with a candidate's outputs in this process (kept,
    compared with what it returned, sampled, made portable, saved raw and as
    a record, perturbed), on a small tensor: the operators it dispatches are
    those the guard watches (a device's copies go through the same ones)."""
    out = torch.ones(trees.SAMPLED_ELEMENTS + 1)
    kept = trees.copy(out)
    trees.same_values([out], [kept])
    sampled = trees.sampled_output("x", [kept], 0)
    outputfiles.portable_leaves(sampled["leaves"])
    outputfiles.save_output(sampled, folder / "harness_example.pt")
    outputfiles.save_output({"structure": "x", "leaves": [kept.to(torch.float64).to(torch.complex64)]},
                            folder / "harness_example.pt")
    os.unlink(folder / "harness_example.pt")
    perturb.perturb_(kept)


def prepare(ctx: frame.WorkerContext) -> State:
    """The host side of the setup: the build hooks, the guard's snapshot, the
    candidate imported (loading what the compile step built), and, under the
    late claim, ModelNew built on the host from the reference's init inputs.
    It runs before the device is taken (frame: behind the device
    gate, so candidate code that starts CUDA waits for the device), so neither
    a slow import nor a big model's construction
    holds the device, and a candidate failing here needs no device at all."""
    cfg = ctx.config
    s = State()
    s.private, s.shared = Path(cfg["private_dir"]), Path(cfg["shared_dir"])
    s.precision = cfg["precision"]
    s.perturber = Perturber()
    ctx.hooks = BuildHooks(cfg["build_root"], ctx.channel, cfg.get("cuda_arch"), s.perturber).install()
    ctx.hooks.device_held = not cfg.get("await_go")  # without the late claim the device was taken first
    if cfg.get("profiled"):
        kernels.load_profiler()  # seconds of imports, on the host rather than in the device's hold
    s.autocast = mathmodes.AutocastWatch()  # before the guard's snapshot: the harness's, no patch
    s.guard = guard.Guard(guard.ops_dispatched(lambda: _harness_tensor_work(s.private)))
    mathmodes.use_strict()  # as the reference: what the candidate lowers from here is its own
    s.settings_before = mathmodes.GlobalSettings.capture(threads=ctx.host_threads)
    ctx.candidate_file = cfg["candidate"]
    ctx.phase("import")
    candidate = taskcode.load_module(ctx.candidate_file, "kernelsweep_candidate", register=True)
    s.model_cls = getattr(candidate, "ModelNew", None)
    check_interface(s.model_cls)
    # The reference is loaded only for get_inputs, after the candidate: what
    # the candidate changed can only spoil its own inputs.
    s.ref = taskcode.load_module(cfg["reference"], "kernelsweep_reference_inputs", register=False)
    s.variants_ahead = {}
    s.on_host = _build_ahead(ctx, s) if cfg.get("await_go") else None
    s.guard.note_imported()
    return s


def _build_ahead(ctx: frame.WorkerContext, s: State) -> tuple[Any, dict[str, list]] | None:
    """ModelNew built on the host once the parent says the reference's init
    inputs are saved (the reference's preparation ended); None when they will
    not be (construct builds it then, as without the late claim)."""
    marker = s.shared / settings.REFERENCE_PREPARED
    while not marker.exists():
        time.sleep(0.02)
    if marker.read_text() != "prepared":
        return None
    ctx.phase("construct")
    built = _built(ctx, s)
    s.variants_ahead = _variants_ahead(ctx, s)
    return built


def _variants_ahead(ctx: frame.WorkerContext, s: State) -> dict[str, tuple[dict[str, int], Any, Any]]:
    """ModelNew for each shape variant the reference built in its preparation
    (it builds ahead only what fits: reference._variants_ahead), at the sizes
    it built it with (its batch alone rescaled, where it must narrow it),
    with the reference module for its inputs: {name: (constants, module, model)}.
    One that fails to build is left out and built again when its variant is
    asked for, where the failure is judged as it would be without building ahead."""
    built = {}
    for plan in ctx.config.get("variants") or []:
        try:
            constants = json.loads((s.shared / f"{plan['name']}_constants.json").read_text())
        except (OSError, ValueError):  # not built ahead by the reference
            continue
        try:
            built[plan["name"]] = (constants, *_variant_on_host(ctx, s, plan["name"], constants))
        except (Exception, MemoryError):  # noqa: BLE001 - judged when the variant is asked for
            continue
    return built


def _variant_on_host(ctx: frame.WorkerContext, s: State, name: str, constants: dict[str, int],
                     on: torch.device | None = None) -> tuple[Any, Any]:
    """A variant's reference module (for its get_inputs) and ModelNew built
    from the variant's init inputs, on the host (or ON a device, as the
    reference built its Model: reference._variant_in_hold)."""
    module = taskcode.load_module(ctx.config["reference"], f"kernelsweep_reference_inputs_{name}",
                                  register=False, constants=constants)
    return module, _build_on_host(ctx, s, _variant_class(ctx, name, constants, s), f"{name}_init.pt", on)


def take_device(ctx: frame.WorkerContext) -> None:
    """The device set up by the harness before any candidate code uses it:
    before the import without the late claim, at "go" with it (frame), so a
    device that cannot be set up is the harness's failure, not the candidate's."""
    machine.resolve_device(ctx.config["device"])
    if ctx.hooks is not None:
        ctx.hooks.device_held = True


def setup(ctx: frame.WorkerContext, s: State) -> State:
    """Once the device is the worker's. The clock comes later (clock): its
    primitives were captured at import (untrusted/clock.py), its cache flush is
    the reference's."""
    ctx.phase("device")
    # Set up already (take_device), on the thread that said "go" under the late claim: made current
    # on this one too, for the driver calls the reference's lent buffer needs (devicehandoff).
    s.device = machine.resolve_device(ctx.config["device"])
    s.clock = None
    s.ready = {"imported": True, **ctx.extras()}
    s.alive: list[list[torch.Tensor]] = []
    s.reduced: set[str] = set()
    s.kept: list[Any] = []
    s.handoff_fd = ctx.config.get("handoff_fd")  # the socket the reference's buffer comes through (_borrow)
    return s


def construct(ctx: frame.WorkerContext, s: State) -> dict[str, Any]:
    built, s.on_host = s.on_host, None
    model, weights = built if built is not None else _built(ctx, s)
    s.model = _to_device(s, model)
    return {"weights": weights}


def _built(ctx: frame.WorkerContext, s: State) -> tuple[Any, dict[str, list]]:
    """The task-shape ModelNew, and its weights' digests as constructed."""
    model = _build_on_host(ctx, s, s.model_cls, "init.pt")
    return model, trees.weight_digests(model.state_dict())


def _build_on_host(ctx: frame.WorkerContext, s: State, model_cls: Any, init_file: str,
                   on: torch.device | None = None) -> Any:
    """ModelNew from the reference's init inputs (a shared file), on the
    host, under the same seed as Model: KernelBench's convention. Nothing of
    the reference's is copied in afterwards, which would undo what ModelNew
    did to its weights at construction (a scale folded into them, a layout
    changed, tensors made in inference mode); a candidate that draws its
    weights otherwise than Model does has other weights, and answers for them.
    ON: built with its tensors made on that device, where the reference built Model so."""
    init = trees.load(s.shared / init_file)
    check_call(model_cls, init, "ModelNew(...)")
    return seeding.construct(model_cls, init, ctx.config["init_seed"], on)


def _to_device(s: State, model: Any) -> Any:
    model = model.to(s.device)
    if s.precision != "fp32":
        model = model.to(seeding.DTYPES[s.precision])
    return model


def _call_checked(s: State, inputs: list, seed: int, armed: bool,
                  model: Any = None) -> tuple[Any, dict[str, Any]]:
    model = s.model if model is None else model
    pristine = trees.clone_tree(inputs)
    threads = _thread_count()
    seeding.set_seed(seed)
    s.perturber.fired = 0
    returned = s.perturber.returned
    s.perturber.armed = armed
    # On the host, the CPU time inside the extension's calls and in the whole call (the work
    # share: CPU time, so a forward that sleeps is not diluted by its idle time).
    host = s.device.type == "cpu"
    s.perturber.inside_ns, s.perturber.inside_raw_ns, s.perturber.added_ns, s.perturber.measuring = 0, 0, 0, host
    s.autocast.look()  # autocast switched on before the call and left on
    s.autocast.active = True  # and entered inside it
    started = cpu_ns()
    try:
        out = model(*inputs)
    finally:
        call_ns = cpu_ns() - started
        s.autocast.active = False
        s.perturber.armed = False
        s.perturber.measuring = False
    # The modes in force when the call returned (set in forward and left on, or set earlier).
    s.autocast.look()
    s.reduced.update(s.autocast.seen)
    s.reduced.update(mathmodes.reduced_precision(mathmodes.GlobalSettings.capture()))
    structure, leaves = trees.flatten_output(out)
    hooked = hooks.installed()
    at_return = [trees.copy(x) if isinstance(x, torch.Tensor) else x for x in leaves]
    _settle(s.device, threads)
    spans = [trees.storage_span(t) for t in trees.tensors_in(leaves)]
    reused = any(sp and sp[1] > sp[0] and any(p and p[0] < sp[1] and sp[0] < p[1]
                                              for old in s.alive for p in map(trees.storage_span, old))
                 for sp in spans)
    signals = {
        "mutates_inputs": not trees.same_values(inputs, pristine),
        "aliases_inputs": trees.aliases(leaves, inputs),
        "reuses_output_storage": reused,
        "changed_after_return": not trees.same_values(at_return, leaves),
        "on_device": all(t.device.type == s.device.type for t in trees.tensors_in(leaves)),
        "plain": trees.plain(leaves),
        "perturbed_calls": s.perturber.fired if armed else None,
        "extension_calls": s.perturber.returned - returned,
        "hooks": hooked,
        "cpu_ms": {"inside": s.perturber.inside_ns / 1e6, "call": max(0, call_ns - s.perturber.added_ns) / 1e6,
                   "inside_raw": s.perturber.inside_raw_ns / 1e6, "call_raw": call_ns / 1e6}
        if host and not armed else None,
    }
    s.alive.append(trees.tensors_in(leaves))
    # The state at return is what is judged: work finishing later is not counted. So an output
    # whose storage an earlier call returned too (a static buffer, a CUDA graph's output) is
    # judged by the values this call put there, and a stale one fails as any wrong answer does.
    return {"structure": structure, "leaves": at_return}, signals


def trials(ctx: frame.WorkerContext, s: State, cases: list[dict[str, Any]],
           handoff: dict[str, Any] | None = None) -> dict[str, Any]:
    """cases: [{name, seed, inputs (a shared file) or None, armed, slots}], in
    order; each output delivered by _deliver, into the buffer the reference's
    worker lent for them (handoff: {bytes}) where it fits."""
    results = []
    seconds = {"calls": 0.0, "save": 0.0}  # where the time goes (diagnostics only: this process is untrusted)
    lent, refused = _borrow(s, handoff)
    held: list = []  # the previous call's inputs (_trial_inputs)
    try:
        with torch.no_grad():
            for i, case in enumerate(cases):
                started = time.monotonic()
                inputs = _trial_inputs(s, case, held)
                if trees.tree_nbytes(held) > settings.HELD_INPUT_BYTES[s.device.type]:
                    held.clear()  # too big to keep beside this trial's: given way now that its inputs are made
                if i == 0:
                    check_call(s.model.forward, inputs, "ModelNew.forward")
                saved, signals = _call_checked(s, inputs, case["seed"], bool(case.get("armed")))
                saving = time.monotonic()
                result = dict(signals, **_deliver(s, case["name"], saved, lent, case.get("slots")))
                held[:] = [inputs]  # through the next trial's call
                del saved, inputs  # the output off the device before the next call
                seconds["calls"] += saving - started
                seconds["save"] += time.monotonic() - saving
                results.append(result)
    finally:
        if lent is not None:
            lent.close()  # after a device synchronize: every copy into it is done
    return {"trials": results, "seconds": seconds, **({"handoff_refused": refused} if refused else {})}


def _trial_inputs(s: State, case: dict[str, Any], held: list) -> list:
    """A trial's inputs, made while the previous trial's (`held`) are still alive,
    which trials() keeps through this trial's call: no trial's inputs, nor the
    harness's copies of them made before the call, lie where the previous trial's
    did. So a candidate that kept an input's address (a CUDA graph replaying its
    first call's copy from the input) computes on stale data in its trials, as it
    would in the timed calls. Where both sets do not fit on the device at once,
    the previous one goes first."""
    def make() -> list:
        if case.get("inputs"):
            return trees.to_device(trees.load(s.shared / case["inputs"]), s.device)
        return seeding.make_inputs(s.ref, case["seed"], s.precision, s.device)

    try:
        return make()
    except torch.OutOfMemoryError:
        pass  # retried after the except clause, which holds the failed draw's frames
    held.clear()
    return make()


def _deliver(s: State, name: str, saved: dict[str, Any], lent: Any, slots: list | None) -> dict[str, Any]:
    """An output to the reference's worker: copied into its slots of the lent
    buffer when it fits them (`handed`); `described` when its comparison fails
    on structure, shape or dtype whatever its values; else saved to a file
    (as are the outputs beyond a buffer lent for the first ones only)."""
    result: dict[str, Any] = {"name": name, "file": f"{name}.pt"}
    if lent is not None and slots is not None and devicehandoff.within(slots, lent.nbytes) \
            and devicehandoff.fits(saved["leaves"], slots):
        result["handed"] = _hand(lent, saved, slots)
    elif slots is not None and outputfiles.raw(saved["leaves"]) \
            and devicehandoff.decided_without_values(saved["leaves"], slots):
        result["described"] = devicehandoff.described(saved)  # a mismatch: no values needed
    else:
        outputfiles.save_output(saved, s.private / f"{name}.pt")
    return result


def _borrow(s: State, handoff: dict[str, Any] | None) -> tuple[Any, str | None]:
    """A buffer the reference's worker lent (one for the trials, one per shape
    variant, each sent once it says so), mapped here, or (None, why not)."""
    if not handoff or s.handoff_fd is None:
        return None, None
    try:
        fd = devicehandoff.receive_descriptor(s.handoff_fd)
        try:
            return devicehandoff.SharedBuffer.open(s.device, fd, int(handoff["bytes"])), None
        finally:
            os.close(fd)
    except (devicehandoff.Unavailable, OSError) as exc:
        return None, str(exc)[:300]


def _hand(lent: Any, saved: dict[str, Any], slots: list) -> dict[str, Any]:
    """Copy an output's tensors into their slots; what the reference needs besides."""
    for x, slot in zip(saved["leaves"], slots):
        if slot is not None:
            devicehandoff.slot_view(lent.tensor, slot).copy_(x)
    return {"structure": saved["structure"],
            "numbers": [None if isinstance(x, torch.Tensor) else x for x in saved["leaves"]]}


def variant(ctx: frame.WorkerContext, s: State, name: str, constants: dict[str, int],
            seed: int, handoff: dict[str, Any] | None = None, slots: list | None = None,
            on_device: bool = False) -> dict[str, Any]:
    """One shape variant: the reference module executed with these size
    constants (for its get_inputs), ModelNew built from the variant's init
    inputs (ON_DEVICE: its tensors made on the device, as the reference made
    Model's; where that fails, no call, and `built_on_host` says why: the
    parent then runs the variant again with both built on the host), one call
    on the variant's seed, its output delivered as the trials' are (_deliver:
    into the buffer the reference's worker lent for it, handoff: {bytes}, at
    its slots, or to a file). The task-shape model (the one timed) is kept as it was."""
    constants_ahead, module, model = s.variants_ahead.pop(name, (None, None, None))
    if constants_ahead != constants:  # not built ahead, or the reference narrowed it since
        try:
            module, model = _variant_on_host(ctx, s, name, constants, s.device if on_device else None)
        except (Exception, MemoryError) as exc:
            if not on_device:
                raise
            # Not built as the reference built Model: no call; its buffer taken and given back
            # (the pair's socket carries one descriptor per lent buffer), both built again on the host.
            lent, _ = _borrow(s, handoff)
            if lent is not None:
                lent.close()
            return {"built_on_host": f"{type(exc).__name__}: {str(exc)[:300]}"}
    model = _to_device(s, model)
    with torch.no_grad():
        inputs = seeding.make_inputs(module, seed, s.precision, s.device)
        saved, signals = _call_checked(s, inputs, seed, False, model=model)
    lent, refused = _borrow(s, handoff)
    try:
        result = dict(signals, **_deliver(s, name, saved, lent, slots))
    finally:
        if lent is not None:
            lent.close()  # after a device synchronize: the copy into it is done
    del model, inputs, saved
    s.alive.pop()  # its output is gone with it
    return dict(result, **({"handoff_refused": refused} if refused else {}))


def _variant_class(ctx: frame.WorkerContext, name: str, constants: dict[str, int], s: State) -> Any:
    """ModelNew for a variant: the candidate module executed again with the
    variant's values for the size constants it assigns as the reference does
    (shapes.shared_overrides; a candidate repeating `batch_size = 16` reads it
    as the reference does), else the class already imported."""
    task = shapes.size_constants(Path(ctx.config["reference"]).read_text(encoding="utf-8"))
    own = shapes.shared_overrides(Path(ctx.candidate_file).read_text(encoding="utf-8"), task, constants)
    if not own:
        return s.model_cls
    module = taskcode.load_module(ctx.candidate_file, f"kernelsweep_candidate_{name}", register=True,
                                  constants=own)
    model_cls = getattr(module, "ModelNew", None)
    check_interface(model_cls)
    return model_cls


def clock(ctx: frame.WorkerContext, s: State, flush_bytes: int) -> dict[str, Any]:
    """The timing clock, flushing as many bytes as the reference's (sized in
    its worker: candidate code has run in this one)."""
    s.clock = Clock(s.device, flush_bytes=flush_bytes)
    return {}


def warmup(ctx: frame.WorkerContext, s: State, seeds: list[int]) -> dict[str, Any]:
    s.alive.clear()
    with torch.no_grad():
        s.clock.block(s.model, [seeding.make_inputs(s.ref, seed, s.precision, s.device) for seed in seeds])
    return {}


def block(ctx: frame.WorkerContext, s: State, seeds: list[int], synchronized: bool = False,
          armed_at: int | None = None) -> dict[str, Any]:
    """Time one call on each seed's inputs, made here first (every timed call
    gets inputs never seen before: no answer can be remembered)."""
    s.kept = []
    s.inputs = [seeding.make_inputs(s.ref, seed, s.precision, s.device) for seed in seeds]
    flags = {"plain": True, "on_device": True, "perturbed_calls": None, "extension_calls": 0, "hooks": []}
    returned = s.perturber.returned

    def keep(i: int, out: Any) -> None:
        flags["hooks"] = flags["hooks"] or hooks.installed()
        structure, leaves = trees.flatten_output(out)
        flags["plain"] = flags["plain"] and trees.plain(leaves)
        flags["on_device"] = flags["on_device"] and all(
            t.device.type == s.device.type for t in trees.tensors_in(leaves))
        # Cloned now, before the next call: outputs that share one buffer are still
        # checked call by call, each with the values its own call left there.
        s.kept.append((structure, [trees.copy(x) if isinstance(x, torch.Tensor) else x for x in leaves]))
        if armed_at is not None and i == armed_at:
            flags["perturbed_calls"] = s.perturber.fired
            s.perturber.armed = False
        if armed_at is not None and i + 1 == armed_at:
            s.perturber.fired = 0
            s.perturber.armed = True

    if armed_at == 0:
        s.perturber.fired, s.perturber.armed = 0, True
    try:
        with torch.no_grad():
            ms = s.clock.block(s.model, s.inputs, synchronized=synchronized, after=keep)
    finally:
        s.perturber.armed = False
    flags["extension_calls"] = s.perturber.returned - returned
    return {"ms": ms, **flags, "clock": s.clock.used}


def save(ctx: frame.WorkerContext, s: State, positions: list[int], names: list[str],
         sample_seed: int) -> dict[str, Any]:
    # Candidate code that would run inside the saving below: an interpreter hook, or its
    # own kernel for an operator the harness's copies go through.
    hooked = hooks.installed() + s.guard.overridden_ops(s.guard.harness_ops)
    machine.synchronize(s.device)
    for pos, name in zip(positions, names):
        outputfiles.save_output(trees.sampled_output(*s.kept[pos], sample_seed), s.private / name)
    s.kept = []
    return {"hooks": hooked}


def report(ctx: frame.WorkerContext, s: State, observe: bool) -> dict[str, Any]:
    # The calls into the extension are those of the judged calls: counted before the
    # profiled one, which a candidate can tell apart (and call its kernel only there).
    calls = dict(sorted(s.perturber.calls.items())[:50])
    launch = None
    if observe:
        cfg = ctx.config
        first = trees.clone_tree(s.inputs[0])

        def one_call() -> None:
            with torch.no_grad():
                s.model(*trees.clone_tree(first))

        launch = kernels.observe(one_call, device=s.device, extension_modules=ctx.hooks.module_names,
                                 kernel_names=cfg.get("kernel_names", []),
                                 op_namespaces=cfg.get("op_namespaces", []))
    return {
        "launch": launch,
        "extension_calls": calls,
        "extension_modules": sorted(ctx.hooks.module_names),
        "patched_harness": s.guard.patched_harness(),
        "patched_torch": s.guard.patched_torch(),
        "settings_changed": s.settings_before.differences(mathmodes.GlobalSettings.capture()),
        "reduced_precision": sorted(set(s.reduced) | set(mathmodes.reduced_precision(
            mathmodes.GlobalSettings.capture()))),
        **ctx.extras(),
    }


if __name__ == "__main__":
    frame.serve(setup, {"construct": construct, "trials": trials, "variant": variant, "clock": clock,
                        "warmup": warmup, "block": block, "save": save, "report": report},
                prepare=prepare, take_device=take_device)
