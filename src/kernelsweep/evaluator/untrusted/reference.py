"""Worker: the reference, alone in its process (no candidate code ever runs
here). It holds what the candidate is judged against, in a directory the
candidate's worker cannot see.

Setup: the device, the reference module, Model under the public init seed
(its init inputs go to the shared directory, read-only for the candidate;
its weights' digests to the parent, for the record) and, on the host before
the device is held, each shape variant's Model and the float64 twin (below)
where they fit (settings.AHEAD_MODEL_BYTES), then the correctness
trials on the evaluation's secret seeds, their outputs saved privately; whether those outputs are constant, near
zero, or so small that zeros would pass the tolerance (degenerate).
On request, after the candidate passed its trials, one shape variant at a time
(kernelsweep.core.shapes; `variant`): the module executed again with
its size constants replaced, Model built from that variant's init inputs
under the same seed (init inputs to the shared directory), one
call on the variant's secret seed, its output saved privately; a variant the
reference cannot run (an exception, out of memory, inputs beyond the budget)
is dropped with the reason. fp32 runs with TF32 off (mathmodes.use_strict).
Under a scaled tolerance profile (config `rounding`) each trial (only the
first for outputs beyond settings.ROUNDING_EVERY_TRIAL_ELEMENTS) and each variant is
also computed by the module's float64 twin (its weights and inputs widened, on
the same device), and the reference's own rounding error per output
(compare.rounding_errors) goes to the parent; where the twin cannot run
(an op without float64, out of memory, a difference beyond rounding) it says
why (`rounding_off`), and the plain bound applies.
Its outputs stay here, on the device while they fit a share of its memory
(KEPT_SHARE; beyond it, in private files): the candidate's saved outputs are
brought here and compared on the device (`judge`), so no output crosses to
the parent and back, and nothing is compared on the host's cores.
Commands: `warmup`, `block` (time the reference on the inputs of the
block's seeds, made on the device first), `outputs` (keep the reference's
outputs for given seeds, sampled as the candidate's are, to verify the
candidate's timed outputs), `judge` (compare the candidate's saved outputs
with the kept ones, each candidate file removed once read)."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import torch

from kernelsweep.core import shapes
from kernelsweep.runtime import taskcode
from kernelsweep.evaluator import compare, settings
from kernelsweep.evaluator.untrusted import (devicehandoff, failures, frame, machine, mathmodes, outputfiles,
                                             seeding, trees)
from kernelsweep.evaluator.untrusted.clock import Clock

# Rescaled probe: far from the trial inputs' scale, same positions.
PROBE_SCALE, PROBE_SHIFT = 1000.0, 3.0
# Outputs kept on a GPU up to a budget set at the first trial (_kept_budget):
# KEPT_SHARE of its memory at least, KEPT_MAX_SHARE at most, and never less than
# CANDIDATE_ROOM times the reference's own peak left to the candidate's process;
# on the cpu device up to KEPT_CPU_BYTES. Beyond: private files, written and
# read with the device held (docs/decisions/2026-12-03-reference-keeps-outputs.md).
KEPT_SHARE = 0.125
KEPT_MAX_SHARE = 0.35
CANDIDATE_ROOM = 4
KEPT_CPU_BYTES = 1 << 30
CROWDING_MIN_BYTES = 2 << 30


class State:
    pass


def _keep(s: State, name: str, structure: str, leaves: list, host_copy: bool = False) -> dict[str, Any] | None:
    """Keep an output (flattened: trees.flatten_output) for judging under NAME:
    on the device while the kept outputs fit the budget, else in a private
    file. Returns it as kept, or spilled: CPU copies with `host_copy`, else None."""
    size = trees.tree_nbytes(leaves)
    if s.kept_budget is None:
        s.call_peak, s.kept_budget = _kept_budget(s.device)
    if s.kept_bytes + size <= s.kept_budget:
        kept = {"structure": structure, "leaves": [
            x.detach().to(s.device).contiguous().clone() if isinstance(x, torch.Tensor) else x for x in leaves]}
        s.kept[name] = kept
        s.kept_bytes += size
        return kept
    # Straight from the device into the file (no host copy first); the caller
    # gets a host copy back only when it compares later outputs with this one.
    outputfiles.save_output({"structure": structure, "leaves": leaves}, s.private / f"{name}.pt")
    s.kept[name] = None
    return _on_host({"structure": structure, "leaves": leaves}) if host_copy else None


def _kept_budget(device: torch.device) -> tuple[int, int]:
    """The reference's need for one call (model, inputs, output: its peak once
    the first trial ran) and the bytes of outputs to keep on the device."""
    if device.type != "cuda":
        return 0, KEPT_CPU_BYTES
    peak = torch.cuda.max_memory_reserved(device)
    return peak, kept_budget_bytes(torch.cuda.get_device_properties(device).total_memory, peak)


def kept_budget_bytes(total: int, peak: int) -> int:
    """KEPT_SHARE of the device at least, KEPT_MAX_SHARE at most, and between
    them whatever leaves the candidate CANDIDATE_ROOM times the reference's peak."""
    return int(min(total * KEPT_MAX_SHARE, max(total * KEPT_SHARE, total - CANDIDATE_ROOM * peak)))


def _unkeep(s: State, name: str) -> dict[str, Any] | None:
    """The output kept under NAME out of the store: as kept on the device, or
    None where it lies in a private file."""
    kept = s.kept.pop(name)
    if kept is not None:
        s.kept_bytes -= trees.tree_nbytes(kept["leaves"])
    return kept


def _kept(s: State, name: str) -> dict[str, Any]:
    """The output kept under NAME, taken out of the store (judged once)."""
    kept = _unkeep(s, name)
    if kept is not None:
        return kept
    path = s.private / f"{name}.pt"
    saved = _load_near(path, s.device)
    _discard(s, path)
    return saved


def _discard(s: State, path: Path) -> None:
    """A judged output file out of its folder (a later read of the same name
    finds nothing, never a stale output): renamed into this worker's trash,
    not deleted. Deleting a GiB-sized file whose pages the kernel is still
    writing back waits for the disk, and the device is held here; the trash
    goes with the evaluation's folder, once the device is released."""
    trash = s.private / "judged"
    trash.mkdir(exist_ok=True)
    s.discarded = getattr(s, "discarded", 0) + 1
    try:
        os.replace(path, trash / str(s.discarded))  # a link or folder moves as itself
    except FileNotFoundError:
        pass


def _load_near(path: Path, device: torch.device, expected: dict[str, Any] | None = None) -> dict[str, Any]:
    """An output file loaded onto DEVICE, or kept on the host when the device
    has no room left (the candidate's process may hold all of it). A
    candidate's file much larger than the EXPECTED (kept) output is refused unread."""
    limit = 1 << 62 if expected is None else \
        2 * trees.tree_nbytes(expected["leaves"]) + outputfiles.MAX_HEADER + (64 << 20)
    try:
        return outputfiles.load_output(path, device, limit=limit)
    except torch.OutOfMemoryError:
        return outputfiles.load_output(path, limit=limit)


def _on_host(output: dict[str, Any]) -> dict[str, Any]:
    return {"structure": output["structure"], "leaves": trees.portable_leaves(output["leaves"])}


def prepare(ctx: frame.WorkerContext) -> State:
    """The host side of the setup, which needs no device: the reference
    module, its init inputs and Model under the public init seed, built on the
    host, the init inputs saved for the candidate. Under the late claim it runs while
    the job before still times (frame.serve), so a big model's construction
    does not hold the device."""
    cfg = ctx.config
    s = State()
    s.private, shared = Path(cfg["private_dir"]), Path(cfg["shared_dir"])
    s.candidate_dir = Path(cfg["candidate_dir"])
    s.precision = cfg["precision"]
    mathmodes.use_strict()
    ctx.phase("load")
    s.ref = taskcode.load_module(cfg["reference"], "kernelsweep_reference", register=True)
    for name in ("Model", "get_inputs"):
        if not hasattr(s.ref, name):
            raise frame.InterfaceProblem(f"the reference defines no {name}")
    s.model = _model_on_host(s.ref, cfg["init_seed"], shared / "init.pt")
    # Only the weights' digests, for the record (the candidate's own are compared with them):
    # ModelNew is built as Model is, under the same seed, and keeps the weights it makes.
    s.weights = trees.weight_digests(s.model.state_dict())
    small = trees.tree_nbytes(list(s.model.state_dict().values())) <= settings.AHEAD_MODEL_BYTES[cfg["device"]]
    s.unbuilt = {}  # {_key(variant, constants): why}: a Model that failed to build ahead (_variants_ahead)
    s.ahead = _variants_ahead(s, cfg) if small else {}
    s.twin = _twin_ahead(s) if small and cfg.get("rounding") else None
    return s


def _twin_ahead(s: State) -> torch.nn.Module | BaseException:
    """The float64 twin (_twin) made on the host in the preparation, from Model
    as built (at the evaluation's precision, as setup converts it): no copy
    back from the device in the hold. What it raises is kept, for setup to record."""
    try:
        return _twin(s.model, through=None if s.precision == "fp32" else seeding.DTYPES[s.precision])
    except (Exception, MemoryError) as exc:  # noqa: BLE001 - the plain bound applies, and says why
        return exc


def _variants_ahead(s: State, cfg: dict[str, Any]) -> dict[str, tuple[dict[str, int], Any, torch.nn.Module]]:
    """Each planned shape variant's module and Model, built on the host
    before the device is held, its init inputs and constants saved for the
    candidate's worker to build ModelNew ahead too: {name: (constants, module,
    model)}. Only while the task's model is small enough (settings.AHEAD_MODEL_BYTES:
    both workers hold every variant's model on the host until it is run). A
    variant whose Model cannot be built with every size rescaled is built with
    its batch alone rescaled, as `run_variant` would narrow it, the failure kept
    for it (s.unbuilt: the reference's own error, not the host's memory). One that cannot be built at all is left out: `variant`
    tries it when asked for, as it would without building ahead, and drops or narrows it then."""
    built = {}
    for plan in cfg.get("variants") or []:
        name = plan["name"]
        for constants in _sizes_to_try(plan["constants"]):
            try:
                built[name] = (constants, *_variant_on_host(cfg, name, constants))
            except (Exception, MemoryError) as exc:  # noqa: BLE001 - judged when asked for
                if _out_of_memory(exc):  # the host's memory, now: tried again when asked for
                    break
                s.unbuilt[_key(name, constants)] = _fails(exc)  # the reference's own failure, as in the hold
                continue
            (Path(cfg["shared_dir"]) / f"{name}_constants.json").write_text(json.dumps(constants))
            break
    return built


def _out_of_memory(exc: BaseException) -> bool:
    """Memory, not the module (failures.out_of_memory)."""
    return failures.out_of_memory(exc) is not None


def _key(name: str, constants: dict[str, int]) -> str:
    return json.dumps([name, constants], sort_keys=True)


def _fails(exc: BaseException) -> str:
    return f"the reference fails: {type(exc).__name__}: {str(exc)[:300]}"


def _model_on_host(module: Any, init_seed: int, init_file: Path, on: torch.device | None = None) -> torch.nn.Module:
    """Model built on the host (or ON a device: its tensors made there) from
    its init inputs under the public init seed, the inputs (made on the host)
    saved first to INIT_FILE: ModelNew is built from them, the same way."""
    init = seeding.make_init_inputs(module, init_seed)
    trees.save(init, init_file)
    return seeding.construct(module.Model, init, init_seed, on)


def _variant_on_host(cfg: dict[str, Any], name: str, constants: dict[str, int],
                     on: torch.device | None = None) -> tuple[Any, torch.nn.Module]:
    """A variant's module (the reference executed with these size constants)
    and its Model (_model_on_host; init inputs to `<name>_init.pt`)."""
    module = taskcode.load_module(cfg["reference"], f"kernelsweep_reference_{name}", register=True,
                                  constants=constants)
    return module, _model_on_host(module, cfg["init_seed"], Path(cfg["shared_dir"]) / f"{name}_init.pt", on)


def _variant_in_hold(s: State, name: str, constants: dict[str, int], on_host: bool) -> tuple[Any, Any, bool]:
    """A variant not built ahead (its task's model too big to hold on the
    host until then), built now: on a GPU with its tensors made on the device
    (a big model's host initialisation and copy took 20-30 s of the hold;
    its candidate is then built the same way, under the same seed), on the
    host where that fails or ON_HOST asks. (module, Model, built on the device)."""
    if s.device.type == "cuda" and not on_host:
        try:
            return (*_variant_on_host(s.config, name, constants, s.device), True)
        except (Exception, MemoryError) as exc:  # noqa: BLE001 - its own failure shows again on the host
            if _out_of_memory(exc):
                raise
            torch.cuda.empty_cache()
    return (*_variant_on_host(s.config, name, constants), False)


def setup(ctx: frame.WorkerContext, s: State) -> State:
    cfg = ctx.config
    atol, rtol = cfg["atol"], cfg["rtol"]
    ctx.phase("device")
    s.device = machine.resolve_device(cfg["device"])
    info = machine.device_info(s.device)
    s.kept, s.kept_bytes = {}, 0
    s.kept_budget = s.call_peak = None  # _kept_budget, at the first output kept
    s.released = False  # the cache given back once the trials are judged (judge)
    s.described, s.layout, s.lent = {}, {}, None  # the trials' outputs as slots; the buffer lent for them (_lend)
    s.lent_variant = None  # the shape variant the lent buffer is for, once it is one's (_lend_variant)
    s.clock = Clock(s.device, info.get("llc_bytes") or info.get("l2_bytes"))
    s.rounding, s.rounding_off, s.rounding_trials = None, None, 0
    if cfg.get("rounding") and (s.twin is None or isinstance(s.twin, BaseException) and _out_of_memory(s.twin)):
        s.twin = _twin_ahead(s)  # too big to be made ahead, or no host memory then: made now, from the host's Model
    model = s.model.to(s.device)
    if s.precision != "fp32":
        model = model.to(seeding.DTYPES[s.precision])
    s.model = model
    if isinstance(s.twin, BaseException):  # a module that cannot be copied or widened
        _no_twin(s, s.twin)

    def run_case(inputs: list, seed: int, name: str, first: dict[str, Any] | None = None,
                 trial: bool = True) -> dict[str, Any]:
        pristine = trees.clone_tree(inputs)
        seeding.set_seed(seed)
        out = model(*inputs)
        machine.synchronize(s.device)
        structure, leaves = trees.flatten_output(out)
        output = {"structure": structure, "leaves": leaves}
        # What the manifest needs of the output, taken on the device before _keep may
        # spill it to a host file (there, a 4 GiB output's checks took seconds each).
        facts = {"_magnitude": compare.max_magnitude(output),
                 "_zeros_pass": compare.zeros_would_pass(output, atol, rtol),
                 "_as_first": first is None or compare.compare_outputs(first, output, atol, rtol)["ok"]}
        keeping = time.monotonic()
        kept = _keep(s, name, structure, leaves, host_copy=name == "trial0")  # later trials compare with it
        if s.twin is not None and trial:  # after _keep: the reference's own peak is measured without it
            try:
                s.twin = s.twin.to(s.device)  # from the host, at the first trial
                errors = compare.rounding_errors(output, _wide_output(s.twin, pristine, seed, s.device))
                s.rounding = errors if s.rounding is None else [max(a, b) for a, b in zip(s.rounding, errors)]
                s.rounding_trials += 1
                if trees.float_elements(leaves) > settings.ROUNDING_EVERY_TRIAL_ELEMENTS:
                    _twin_done(s)  # a large output's largest error varies little between draws
            except (Exception, MemoryError) as exc:  # noqa: BLE001 - the plain bound applies, and says why
                _no_twin(s, exc)
        s.described[name] = devicehandoff.describe(leaves)
        spent["keep"] += time.monotonic() - keeping
        return {"name": name, "mutates_inputs": not trees.same_values(inputs, pristine),
                "aliases_inputs": trees.aliases(leaves, inputs), "output_bytes": trees.tree_nbytes(leaves),
                "_saved": kept, **facts}

    ctx.phase("trials")
    started, spent = time.monotonic(), {"keep": 0.0}  # where the time goes (the parent's stage_s)
    trials, varies = [], False
    try:
        with torch.no_grad():
            for i, seed in enumerate(cfg["trial_seeds"]):
                first = trials[0]["_saved"] if trials and not varies else None  # one difference settles it
                trials.append(dict(run_case(seeding.make_inputs(s.ref, seed, s.precision, s.device), seed,
                                            f"trial{i}", first), seed=seed))
                varies = varies or not trials[-1]["_as_first"]
            near_zero = all(t["_magnitude"] <= atol for t in trials)
            degenerate = all(t["_zeros_pass"] for t in trials)
            judged_atol = compare.distinguishing_tolerance([t["_magnitude"] for t in trials], atol) \
                if degenerate else atol
            if not varies and judged_atol < atol:  # alike within atol, but judged with a finer one
                varies = _varies(s, trials, judged_atol, rtol)
            # A constant answer would pass every trial: a match cannot tell a candidate from one.
            constant = len(trials) > 1 and not varies
            probes = []
            if constant:
                ctx.phase("probes")
                base = seeding.make_inputs(s.ref, trials[0]["seed"], s.precision, s.device)
                for kind in ("nan", "scaled"):
                    probe = trees.map_tensors(base, lambda t, k=kind: (
                        t if not t.is_floating_point() else
                        torch.full_like(t, float("nan")) if k == "nan" else t * PROBE_SCALE + PROBE_SHIFT))
                    trees.save(probe, Path(cfg["shared_dir"]) / f"probe_{kind}_in.pt")
                    probes.append(dict(run_case(probe, trials[0]["seed"], f"probe_{kind}", trial=False),
                                       seed=trials[0]["seed"], inputs=f"probe_{kind}_in.pt"))
    except torch.OutOfMemoryError as exc:
        # The candidate builds ModelNew meanwhile (judge/correctness.py): out of memory because its
        # process holds the device is the candidate's failure, not the harness's (as for variants).
        if s.device.type == "cuda":
            s.peak_reserved = torch.cuda.max_memory_reserved(s.device)
        held = _crowded_out(s, exc)
        if held is None:
            raise
        s.ready = {"crowded_out": held, "message": str(exc)[:300]}
        return s
    if s.twin is not None:
        _twin_done(s)  # its memory back before the candidate's calls
    for case in trials + probes:  # what stays here: the kept output and the facts above
        for key in [k for k in case if k.startswith("_")]:
            del case[key]
    input_bytes = trees.tree_nbytes(seeding.make_inputs(s.ref, trials[0]["seed"], s.precision, s.device))
    s.input_bytes, s.config = input_bytes, cfg
    s.peak_reserved = torch.cuda.max_memory_reserved(s.device) if s.device.type == "cuda" else 0
    s.ready = {"trials": trials, "probes": probes, "constant": constant, "near_zero": near_zero,
               "degenerate": degenerate, "atol": judged_atol, "device_info": info, "flush_bytes": s.clock.flush_bytes, "input_bytes": input_bytes,
               "weights": s.weights, "rounding": s.rounding, "rounding_off": s.rounding_off,
               "rounding_trials": s.rounding_trials,
               "seconds": dict(spent, trials=time.monotonic() - started), **_lend(s, cfg.get("handoff_fd"))}
    return s


def _twin(model: torch.nn.Module, device: torch.device | str = "cpu",
          through: torch.dtype | None = None) -> torch.nn.Module:
    """The reference module in float64 on DEVICE: a copy (its state as it is
    now, so both see the same calls from here) with its floating parameters
    and buffers widened, made there directly (no second copy of the weights on
    the reference's device); THROUGH: the dtype they are rounded to first (the
    evaluation's precision, for a Model not yet converted to it). Tensors it
    keeps otherwise are copied as they are."""
    memo: dict[int, Any] = {}
    for tensor in list(model.parameters()) + list(model.buffers()):
        if tensor.is_floating_point():
            source = tensor.detach() if through is None else tensor.detach().to(through)
            wide = source.to(device, torch.float64, copy=True)
        else:
            wide = tensor.detach().to(device, copy=True)
        memo[id(tensor)] = torch.nn.Parameter(wide, tensor.requires_grad) \
            if isinstance(tensor, torch.nn.Parameter) else wide
    return copy.deepcopy(model, memo)


def _wide_output(twin: torch.nn.Module, inputs: list, seed: int, device: torch.device) -> dict[str, Any]:
    """The twin's output on INPUTS widened, under the call's seed; tensors the
    forward makes without a dtype are float64 too (the default dtype, for the call)."""
    wide = trees.map_tensors(inputs, lambda t: t.to(torch.float64) if t.is_floating_point() else t)
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        seeding.set_seed(seed)
        out = twin(*wide)
        machine.synchronize(device)
    finally:
        torch.set_default_dtype(default)
    structure, leaves = trees.flatten_output(out)
    return {"structure": structure, "leaves": leaves}


def _no_twin(s: State, exc: BaseException) -> None:
    """The float64 twin is given up: the plain bound applies, for the reason recorded."""
    s.rounding, s.rounding_trials = None, 0
    s.rounding_off = f"{type(exc).__name__}: {str(exc)[:300]}"
    _twin_done(s)


def _twin_done(s: State) -> None:
    """No more trials for the float64 twin: its memory back."""
    s.twin = None
    if s.device.type == "cuda":
        torch.cuda.empty_cache()


def _varies(s: State, trials: list[dict[str, Any]], atol: float, rtol: float) -> bool:
    """Does any trial's output differ from the first's at this tolerance? (The
    outputs as kept: on the device, or in a private file.)"""
    first = trials[0]["_saved"]
    for t in trials[1:]:
        other = t["_saved"] if t["_saved"] is not None else _load_near(s.private / f"{t['name']}.pt", s.device)
        if not compare.compare_outputs(first, other, atol, rtol)["ok"]:
            return True
    return False


def _lend(s: State, sock_fd: int | None) -> dict[str, Any]:
    """The trials' and probes' outputs as slots (`output_slots`: what an output
    must be to be handed over, or judged on its description when it cannot
    match: untrusted/devicehandoff.py) and, on a GPU, a device buffer with those
    slots, its descriptor sent to the candidate's worker: {"handoff": {"bytes"}}.
    Where all of them do not fit beside CANDIDATE_ROOM times the reference's
    peak, the buffer holds the first outputs that do ("handoff_partial": how
    many, and why), the rest crossing in files; {"handoff_off": why} when not
    even the first fits, or the driver refuses."""
    s.layout, nbytes = devicehandoff.slot_layout(s.described)
    shown = {"output_slots": s.layout}
    if sock_fd is None or s.device.type != "cuda":
        return shown
    free, _ = torch.cuda.mem_get_info(s.device)
    room = free - CANDIDATE_ROOM * s.call_peak  # the kept outputs are already out of `free`
    short = f"{nbytes} bytes of outputs, {max(room, 0)} bytes of room"
    lent, count = (nbytes, len(s.layout)) if nbytes <= room else devicehandoff.lendable_bytes(s.layout, room)
    if lent == 0:
        return dict(shown, handoff_off=short)
    try:
        _lend_buffer(s, sock_fd, lent)
    except (devicehandoff.Unavailable, OSError) as exc:
        return dict(shown, handoff_off=str(exc)[:300])
    partial = {"handoff_partial": f"{count} of {len(s.layout)} outputs: {short}"} if count < len(s.layout) else {}
    return dict(shown, handoff={"bytes": s.lent.nbytes}, **partial)


def _lend_buffer(s: State, sock_fd: int, nbytes: int) -> None:
    """A device buffer of NBYTES made and its descriptor sent to the candidate's
    worker (s.lent), any buffer lent before given back first; a step that fails
    gives it back and raises."""
    _return_buffer(s)
    try:
        s.lent = devicehandoff.SharedBuffer.create(s.device, nbytes)
        devicehandoff.send_descriptor(sock_fd, s.lent.export())
    except BaseException:
        _return_buffer(s)
        raise


def _return_buffer(s: State) -> None:
    if s.lent is not None:
        s.lent.close()
        s.lent = None
    s.lent_variant = None  # the buffer, if a variant's (_lend_variant), is gone with it


def _described(s: State, name: str, described: Any) -> dict[str, Any]:
    """The candidate's output of NAME as its worker described it (structure,
    numbers, each tensor's dtype and shape, no values): meta tensors, accepted
    only where the comparison fails on structure, shape or dtype before it reads
    a value (devicehandoff.decided_without_values). ValueError for anything else."""
    slots = s.layout.get(name)
    if slots is None or not isinstance(described, dict) or not isinstance(described.get("structure"), str) \
            or not isinstance(described.get("leaves"), list) or len(described["leaves"]) > 10_000:
        raise ValueError(f"output described as {str(described)[:200]}")
    leaves: list[Any] = []
    for leaf in described["leaves"]:
        if type(leaf) in (bool, int, float):
            leaves.append(leaf)
            continue
        shape = leaf.get("shape") if isinstance(leaf, dict) else None
        if not isinstance(shape, list) or len(shape) > 64 or not all(type(n) is int and n >= 0 for n in shape) \
                or leaf.get("dtype") not in outputfiles.DTYPES:
            raise ValueError(f"a leaf described as {str(leaf)[:200]}")
        leaves.append(torch.empty(shape, dtype=outputfiles.DTYPES[leaf["dtype"]], device="meta"))
    if not devicehandoff.decided_without_values(leaves, slots):
        raise ValueError("an output described without its values, which the comparison would need")
    return {"structure": described["structure"], "leaves": leaves}


def _handed(s: State, name: str, handed: Any) -> dict[str, Any]:
    """The candidate's output of NAME from the lent buffer, copied out (what
    the candidate's process writes there later changes nothing here): the
    slots are this worker's layout; from the candidate only its structure
    string and its number leaves, checked. ValueError for anything else."""
    slots = s.layout.get(name) if s.lent is not None else None
    if slots is None or not devicehandoff.within(slots, s.lent.nbytes):
        raise ValueError(f"no buffer slot for {name}")
    if not isinstance(handed, dict) or not isinstance(handed.get("structure"), str) \
            or not isinstance(handed.get("numbers"), list) or len(handed["numbers"]) != len(slots):
        raise ValueError(f"handed output described as {str(handed)[:200]}")
    leaves = []
    for slot, number in zip(slots, handed["numbers"]):
        if slot is not None:
            view = devicehandoff.slot_view(s.lent.tensor, slot)
            try:
                leaves.append(view.clone())
            except torch.OutOfMemoryError:  # no room left on the device (as _load_near)
                leaves.append(view.to("cpu"))
        elif type(number) in (bool, int, float):
            leaves.append(number)
        else:
            raise ValueError(f"a number leaf {str(number)[:100]}")
    return {"structure": handed["structure"], "leaves": leaves}


def run_variant(s: State, variant: dict[str, Any], on_host: bool = False) -> dict[str, Any]:
    """One shape variant on the reference: {name, file, seed, constants, ...} or
    {name, dropped: reason}. When the reference cannot run every size
    rescaled (a channel count no longer divisible by its groups, a width
    by its heads), the variant is tried once more with only its batch-like
    constants rescaled (shapes.batch_only); `narrowed` then says why.
    Out of memory because the candidate's process holds the device's memory
    is not a drop: {name, dropped, crowded_out: bytes held} (_crowded_out)."""
    constants, *narrower = _sizes_to_try(variant["constants"])
    result = _try_variant(s, variant["name"], constants, variant["seed"], on_host)
    if not result.get("dropped") or result.get("crowded_out"):
        return result
    if narrower:
        again = _try_variant(s, variant["name"], narrower[0], variant["seed"], on_host)
        if again.get("crowded_out"):
            return again
        if not again.get("dropped"):
            return dict(again, narrowed=result["dropped"])
    return result


def _sizes_to_try(constants: dict[str, int]) -> list[dict[str, int]]:
    """A variant's sizes, then (where it differs) its batch alone rescaled
    (shapes.batch_only): what it is narrowed to when the reference cannot run it."""
    batch = shapes.batch_only(constants)
    return [constants, batch] if batch and batch != constants else [constants]


def _crowded_out(s: State, exc: BaseException) -> int | None:
    """After an out-of-memory failure on a GPU: the bytes of device memory
    others hold (the candidate's process: the timing slot admits no one else),
    when that is more than twice what the reference itself needed for the
    task's shape (and more than CROWDING_MIN_BYTES). Variants run after the
    candidate's trials, and the reference's trials while the candidate builds
    ModelNew; a candidate must not be able to drop either by holding the
    device's memory."""
    if s.device.type != "cuda" or not isinstance(exc, torch.OutOfMemoryError):
        return None
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info(s.device)
    others = total - free - torch.cuda.memory_reserved(s.device)
    return others if others > max(2 * s.peak_reserved, CROWDING_MIN_BYTES) else None


def _try_variant(s: State, name: str, constants: dict[str, int], seed: int, on_host: bool) -> dict[str, Any]:
    cfg, task_bytes = s.config, s.input_bytes
    model = inputs = out = None
    on_device = False
    if s.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(s.device)  # the variant's own peak, after its call (_lend_variant)
    try:
        ahead = s.ahead.get(name, (None,))[0] == constants
        if ahead:
            _, module, model = s.ahead.pop(name)
        elif _key(name, constants) in s.unbuilt:  # its Model failed to build ahead: it would again
            return {"name": name, "dropped": s.unbuilt[_key(name, constants)]}
        else:  # not built ahead
            module, model, on_device = _variant_in_hold(s, name, constants, on_host)
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
            twin = _variant_twin(s, model)
            seeding.set_seed(seed)
            out = model(*inputs)
            machine.synchronize(s.device)
            s.variant_peak = torch.cuda.max_memory_reserved(s.device) if s.device.type == "cuda" else 0
            structure, leaves = trees.flatten_output(out)
            signals = {"mutates_inputs": not trees.same_values(inputs, pristine),
                       "aliases_inputs": trees.aliases(leaves, inputs)}
            if isinstance(twin, torch.nn.Module):
                signals.update(_variant_rounding({"structure": structure, "leaves": leaves}, twin, pristine, seed,
                                                 s.device))
            elif twin is not None:
                signals["rounding_off"] = twin
            del twin
            _keep(s, name, structure, leaves)
            s.described[name] = devicehandoff.describe(leaves)
        return {"name": name, "seed": seed, "constants": constants, "built_ahead": ahead,
                "built_on_device": on_device, **signals}
    except (Exception, MemoryError) as exc:  # noqa: BLE001 - the reference cannot run this shape
        dropped = {"name": name, "dropped": _fails(exc)}
        held = _crowded_out(s, exc)
        return dropped if held is None else dict(dropped, crowded_out=held)
    finally:
        del model, inputs, out
        if s.device.type == "cuda":
            torch.cuda.empty_cache()


def _variant_twin(s: State, model: torch.nn.Module) -> torch.nn.Module | str | None:
    """A variant's float64 twin under a scaled profile, or why there is none."""
    if not s.config.get("rounding"):
        return None
    try:
        return _twin(model, s.device)
    except (Exception, MemoryError) as exc:  # noqa: BLE001 - the plain bound applies, and says why
        return f"{type(exc).__name__}: {str(exc)[:300]}"


def _variant_rounding(output: dict[str, Any], twin: torch.nn.Module, inputs: list, seed: int,
                      device: torch.device) -> dict[str, Any]:
    try:
        return {"rounding": compare.rounding_errors(output, _wide_output(twin, inputs, seed, device))}
    except (Exception, MemoryError) as exc:  # noqa: BLE001 - the plain bound applies, and says why
        return {"rounding_off": f"{type(exc).__name__}: {str(exc)[:300]}"}


def variant(ctx: frame.WorkerContext, s: State, name: str, on_host: bool = False) -> dict[str, Any]:
    """One planned shape variant on the reference (run_variant), asked for only
    once the candidate is correct on the task's shape: a candidate failing
    earlier costs no variant here. ON_HOST: asked again, its Model built on
    the host, where ModelNew could not be built on the device (_variant_in_hold)."""
    plan = next(v for v in s.config.get("variants") or [] if v["name"] == name)
    if on_host:
        _forget_variant(s, name)
    case = run_variant(s, plan, on_host)
    return {"variant": case if case.get("dropped") else dict(case, **_lend_variant(s, name))}


def _forget_variant(s: State, name: str) -> None:
    """A variant's first run, built on the device, before it runs again on
    the host: its kept output (if the candidate's was never compared with it),
    the buffer lent for it and its slots, all given back."""
    if name in s.kept and _unkeep(s, name) is None:
        _discard(s, s.private / f"{name}.pt")
    if s.lent_variant == name:
        _return_buffer(s)
    s.layout.pop(name, None)
    s.described.pop(name, None)
    if s.device.type == "cuda":
        torch.cuda.empty_cache()


def _lend_variant(s: State, name: str) -> dict[str, Any]:
    """A device buffer for one variant's output, lent as the trials' was
    (_lend): {"handoff": {bytes}, "slots"}; {} where its output crosses in a file
    (not a GPU, no room beside CANDIDATE_ROOM times the variant's peak, the
    driver refuses). Given back once the variant is judged (judge)."""
    sock_fd = s.config.get("handoff_fd")
    if sock_fd is None or s.device.type != "cuda" or name not in s.described:
        return {}
    layout, nbytes = devicehandoff.slot_layout({name: s.described[name]})
    free, _ = torch.cuda.mem_get_info(s.device)
    if nbytes == 0 or nbytes > free - CANDIDATE_ROOM * s.variant_peak:
        return {}
    try:
        _lend_buffer(s, sock_fd, nbytes)
    except Exception:  # noqa: BLE001 - the driver refused a step: the output crosses in a file
        return {}
    s.layout[name], s.lent_variant = layout[name], name
    return {"handoff": {"bytes": s.lent.nbytes}, "slots": layout[name]}


def _inputs(s: State, seed: int) -> list:
    return seeding.make_inputs(s.ref, seed, s.precision, s.device)


def warmup(ctx: frame.WorkerContext, s: State, seeds: list[int]) -> dict[str, Any]:
    with torch.no_grad():
        s.clock.block(s.model, [_inputs(s, seed) for seed in seeds])
    return {}


def block(ctx: frame.WorkerContext, s: State, seeds: list[int], synchronized: bool = False) -> dict[str, Any]:
    # Each output copied after its call, as the candidate's worker keeps its own: the parent's
    # window around this block is the measure of the harness's work around the timed calls.
    with torch.no_grad():
        ms = s.clock.block(s.model, [_inputs(s, seed) for seed in seeds], synchronized=synchronized,
                           after=lambda i, out: trees.clone_tree(out))
    return {"ms": ms}


def outputs(ctx: frame.WorkerContext, s: State, seeds: list[int], names: list[str],
            sample_seed: int) -> dict[str, Any]:
    """Keep the reference's outputs on the inputs of these timing seeds,
    sampled at the same positions as the candidate's (trees.sampled_output)."""
    with torch.no_grad():
        for seed, name in zip(seeds, names):
            out = s.model(*_inputs(s, seed))
            machine.synchronize(s.device)
            sampled = trees.sampled_output(*trees.flatten_output(out), sample_seed)
            _keep(s, name, sampled["structure"], sampled["leaves"])
    return {}


def judge(ctx: frame.WorkerContext, s: State, cases: list[dict[str, Any]], atol: float,
          rtol: float, allowances: list[float] | None = None) -> dict[str, Any]:
    """Compare the candidate's saved outputs with the kept ones, on the device
    (with the rounding allowance per output leaf the parent gives, if any).
    cases: [{name (kept here), file (in the candidate's folder), grouped}];
    for the grouped ones also whether each equals the first grouped one
    bit for bit (outputs that do not depend on the inputs). Each result is
    compare.compare_outputs's, or {ok: False, unreadable: why}."""
    results, first = [], None
    seconds = {"load": 0.0, "values": 0.0, "on_host": 0.0}  # where the time goes (the parent's stage_s)
    for case in cases:
        started = time.monotonic()
        mine = _kept(s, case["name"])
        path = s.candidate_dir / Path(case["file"]).name  # a bare name: never outside the candidate's folder
        try:
            if case.get("handed") is not None:
                theirs = _handed(s, case["name"], case["handed"])
            elif case.get("described") is not None:
                theirs = _described(s, case["name"], case["described"])
            else:
                theirs = _load_near(path, s.device, mine)
        except Exception as exc:  # noqa: BLE001 - a file the candidate's process wrote
            results.append({"ok": False, "unreadable": f"{type(exc).__name__}: {exc}"[:500],
                            "tampered": isinstance(exc, outputfiles.NotAnOutputFile)})
            continue
        finally:
            _discard(s, path)
            seconds["load"] += time.monotonic() - started
        started = time.monotonic()
        try:
            result = compare.compare_outputs(mine, theirs, atol, rtol, allowances)
        except torch.OutOfMemoryError:  # no room on the device for the comparison: the same on the host
            fallback = time.monotonic()
            mine, theirs = _on_host(mine), _on_host(theirs)
            result = compare.compare_outputs(mine, theirs, atol, rtol, allowances)
            seconds["on_host"] += time.monotonic() - fallback
        if case.get("grouped") and case.get("described") is not None:
            result["same_as_first"] = False  # no values (and a mismatch, which decides the verdict)
        elif case.get("grouped"):
            first = theirs if first is None else first
            result["same_as_first"] = compare.identical_outputs(first, theirs)
        seconds["values"] += time.monotonic() - started
        results.append(result)
    if s.device.type == "cuda" and not s.released and not any(
            v is not None for v in s.kept.values()):
        # The trials' outputs are judged: their memory goes back to the device for the
        # candidate's timing (once: a cache emptied between timing blocks would cost the
        # reference's next call a fresh allocation).
        mine = theirs = first = None
        _return_buffer(s)
        torch.cuda.empty_cache()
        s.released = True
    elif s.device.type == "cuda" and s.lent_variant in {case["name"] for case in cases}:
        _return_buffer(s)  # a shape variant's (_lend_variant), judged
    return {"results": results, "seconds": seconds}


if __name__ == "__main__":
    frame.serve(setup, {"warmup": warmup, "block": block, "outputs": outputs, "judge": judge, "variant": variant},
                prepare=prepare)
