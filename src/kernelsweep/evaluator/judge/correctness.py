"""Correctness on secret inputs: ModelNew built as the reference built
Model, then the trials, one call each on a secret seed sent one at a time
(one trial, drawn at random, with the extension's results perturbed); the
outputs compared in the reference's worker (untrusted/reference.judge →
compare.compare_outputs), with file names of the parent's choosing."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelsweep.core import fileio
from kernelsweep.evaluator import record, settings
from kernelsweep.evaluator.errors import HarnessError
from kernelsweep.evaluator.judge import evidence, verdict

if TYPE_CHECKING:
    from kernelsweep.evaluator.evaluation import Evaluation
    from kernelsweep.evaluator.sandbox import Worker

DISK_MARGIN = 1 << 30  # room kept free beyond the outputs' own size


def check(ev: Evaluation, work: Path, ref: Worker, cand: Worker,
          started: float) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """(the finished record, None) when the trials decide, else (None, the
    reference's manifest) for the duties after them."""
    cand_ready = cand.reply(0)
    if not cand_ready or cand_ready.get("status") != "ok":
        ref.abort()
        cand.abort()
        outcome = cand.wait()
        ev.note_outcome(outcome, candidate=True)
        return ev.candidate_failure(outcome, cand_ready), None
    if ev.without_device:  # its hello said it failed, its setup says it did not: not its own hello
        ev.flags.append("report_tampered")
        return ev.finish("cheat", verdict.cheat_error(ev.flags, ev.log_path())), None
    ev.note_builds(cand_ready)
    # ModelNew is built while the reference runs its trials: once the reference's setup has
    # begun (its "device" phase), its init inputs are in the shared folder.
    construct = cand.send("construct") if ref.reached("device") else None
    manifest = ev.reference_ready(ref)
    if manifest.get("crowded_out"):
        cand.abort()
        return ev.finish("out_of_memory", {
            "type": "ReferenceCrowdedOut", "log": ev.log_path(),
            "message": f"the reference ran out of device memory computing its trials while the candidate's "
                       f"process, building ModelNew, held {manifest['crowded_out'] / 2**30:.1f} GiB "
                       f"({manifest.get('message')})"}), None
    ev.add_seconds("reference", manifest, ("trials", "keep"))
    _room_for_outputs(work, manifest)
    if manifest["degenerate"]:
        ev.flags.append("degenerate_tolerance")
        ev.atol = manifest["atol"]  # compare.distinguishing_tolerance of the reference's outputs
    _note_rounding(ev, manifest)
    with ev.spent("construct"):  # what of ModelNew's construction outlasted the reference's trials
        step = cand.reply(construct if construct is not None else cand.send("construct"))
    if not step or step.get("status") != "ok":
        return ev.candidate_stopped(cand, step), None
    ev.record["weights"] = record.weights_kept(manifest["weights"], step.get("weights"))
    armed = ev.rng.randrange(len(manifest["trials"]))
    cases = [{"name": t["name"], "seed": t["seed"], "armed": i == armed}
             for i, t in enumerate(manifest["trials"])]
    cases += [{"name": p["name"], "seed": p["seed"], "inputs": p["inputs"]} for p in manifest["probes"]]
    handoff = manifest.get("handoff")
    ev.output_handoff = _handoff_way(manifest)
    for case in cases:
        case["slots"] = (manifest.get("output_slots") or {}).get(case["name"])
    step = cand.request("trials", cases=cases, handoff={"bytes": handoff["bytes"]} if handoff else None)
    if not step or step.get("status") != "ok":
        return ev.candidate_stopped(cand, step), None
    ev.add_seconds("trials", step, ("calls", "save"))
    if handoff and step.get("handoff_refused"):
        ev.output_handoff = f"files (the candidate's worker: {str(step['handoff_refused'])[:200]})"
    ev.stage_s["correctness"] = round(time.monotonic() - started, 3)
    early = cand.request("report", observe=False)
    if early and early.get("status") == "ok":
        evidence.note_patches(ev, early)
    return _judge(ev, ref, manifest, step["trials"], armed), manifest


def _handoff_way(manifest: dict[str, Any]) -> str:
    """How the trials' outputs cross (provenance.output_handoff): `device`,
    `device and files (why)` where the lent buffer holds only the first ones,
    `files (why)` or `files`."""
    if manifest.get("handoff"):
        partial = manifest.get("handoff_partial")
        return f"device and files ({partial})" if partial else "device"
    return f"files ({manifest['handoff_off']})" if manifest.get("handoff_off") else "files"


def compared(ev: Evaluation, ref: Worker, cases: list[dict[str, Any]],
             allowances: list[float] | None | str = "task") -> list[dict[str, Any]]:
    """The candidate's saved outputs compared with the reference's, in the
    reference's worker on its device (untrusted/reference.judge): one result
    per case, compare.compare_outputs's or {ok: False, unreadable: why}.
    File names are the parent's, never taken from a candidate's reply.
    allowances: the rounding allowance per output leaf ("task": the task shape's)."""
    allowances = ev.allowances if allowances == "task" else allowances
    with ev.spent("compare"):
        reply = ref.request("judge", cases=cases, atol=ev.atol, rtol=ev.cfg.rtol, allowances=allowances)
    ev.reference_ok(ref, reply, "comparing outputs")
    ev.add_seconds("compare", reply, ("load", "values", "on_host"))
    return reply["results"]


def note_margin(ev: Evaluation, cmp: dict[str, Any]) -> None:
    """The worst margin (|c - r| over its bound) among the comparisons that decide correctness."""
    margin = cmp.get("margin")
    if margin is not None:
        held = ev.record["tolerance"]["margin"]
        ev.record["tolerance"]["margin"] = margin if held is None else max(held, margin)


def _room_for_outputs(work: Path, manifest: dict[str, Any]) -> None:
    """The candidate saves its outputs of the trials and probes as the
    reference did: a disk without room for them would fail the candidate's
    worker, a harness fault blamed on the candidate. Stop before that."""
    need = sum(case["output_bytes"] for case in manifest["trials"] + manifest["probes"])
    free = shutil.disk_usage(work).free
    if free < need + DISK_MARGIN:
        raise HarnessError(f"no room for the candidate's outputs: the trials' outputs need "
                           f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB is free on the disk of {work} "
                           f"(set TMPDIR to a larger disk, or fewer trials)")


def _note_rounding(ev: Evaluation, manifest: dict[str, Any]) -> None:
    """The tolerance as judged: under a scaled profile, the reference's own
    rounding error per output (its float64 twin's measure) and the allowance it
    gives, or why there is none (the plain bound then applies)."""
    tolerance = ev.record["tolerance"]
    tolerance["atol"] = ev.atol
    if not ev.cfg.profile.scaled:
        return
    rounding = manifest.get("rounding")
    if rounding is None:
        tolerance["fallback"] = manifest.get("rounding_off") or "no trial was computed in float64"
        return
    ev.allowances = settings.rounding_allowances(rounding)
    tolerance.update(rounding=rounding, allowance=ev.allowances, rounding_trials=manifest.get("rounding_trials"))


def _judge(ev: Evaluation, ref: Worker, manifest: dict[str, Any], trials: list[dict[str, Any]],
           armed: int) -> dict[str, Any] | None:
    """Compare every trial; None when the candidate goes on to the variants."""
    if fileio.sha256_file(ev.reference) != ev.reference_file_sha:
        ev.flags.append("reference_modified")
    by_name = {t["name"]: t for t in trials}
    ev.trial_signals = trials
    extension_used = any(t.get("extension_calls") for t in trials)
    missing = next((i for i, case in enumerate(manifest["trials"]) if case["name"] not in by_name), None)
    if missing is not None:
        return ev.finish(*verdict.trials_verdict(_evidence(ev, missing=missing)))
    perturbed_at = armed if by_name[manifest["trials"][armed]["name"]].get("perturbed_calls") else None
    # Constant-output check: the outputs of the trials (the perturbed call's aside) and probes.
    constant = bool(manifest.get("constant"))
    cases = [{"name": t["name"], "file": f"{t['name']}.pt", "grouped": constant and i != perturbed_at}
             for i, t in enumerate(manifest["trials"])]
    cases += [{"name": p["name"], "file": f"{p['name']}.pt", "grouped": True}
              for p in manifest["probes"] if p["name"] in by_name] if constant else []
    for case in cases:  # an output handed over in the reference's buffer, or described (devicehandoff.py)
        for way in ("handed", "described"):
            if by_name[case["name"]].get(way) is not None:
                case[way] = by_name[case["name"]][way]
    results = compared(ev, ref, cases)
    max_abs, max_rel, passed, mismatch = 0.0, 0.0, 0, None
    perturbed = None
    for i, case in enumerate(manifest["trials"]):
        cmp = results[i]
        if cmp.get("tampered"):
            ev.flags.append("output_file_tampered")
            return ev.finish(*verdict.trials_verdict(_evidence(ev, tampered=i)))
        if "unreadable" in cmp:
            return ev.finish(*verdict.trials_verdict(_evidence(ev, unreadable=(i, cmp["unreadable"]))))
        evidence.note_trial_signals(ev, by_name[case["name"]], case)
        if i == perturbed_at:
            perturbed = cmp  # judged for dependence, not correctness
            continue
        if i == armed and extension_used:
            ev.flags.append("kernel_result_unused")  # that call never ran the extension
        if cmp["max_abs_diff"] is not None:
            max_abs, max_rel = max(max_abs, cmp["max_abs_diff"]), max(max_rel, cmp["max_rel_diff"])
        note_margin(ev, cmp)
        if cmp["ok"]:
            passed += i != armed  # of the configured trials (the armed call is an extra one)
        elif mismatch is None:
            mismatch = (i, cmp)
    ev.record["trials_passed"] = passed
    if mismatch is None or mismatch[1]["max_abs_diff"] is not None:
        ev.record["max_abs_diff"], ev.record["max_rel_diff"] = max_abs, max_rel
    if constant:
        ev.flags.append("constant_reference")
        grouped = [r for r, c in zip(results, cases) if c["grouped"]]
        if len(grouped) > 1 and all(r.get("same_as_first") for r in grouped):
            ev.flags.append("constant_output")
    if mismatch is None and perturbed is not None and perturbed["ok"]:
        ev.flags.append("kernel_result_unused")
    first = None if mismatch is None else verdict.Mismatch(mismatch[0], mismatch[1].get("kind"),
                                                           mismatch[1].get("message"))
    found = verdict.trials_verdict(_evidence(ev, mismatch=first, constant=constant))
    return ev.finish(*found) if found else None


def _evidence(ev: Evaluation, **found: Any) -> verdict.TrialsEvidence:
    return verdict.TrialsEvidence(flags=tuple(ev.flags), log=ev.log_path(), **found)
