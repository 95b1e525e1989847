"""The shape variants (kernelsweep.core.shapes: the task's size constants
rescaled): a candidate correct on the task's shape is called once on each
variant the reference could run, in the same workers; wrong or failing on
one is `wrong_on_variant`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from kernelsweep.core import shapes
from kernelsweep.evaluator import settings
from kernelsweep.evaluator.judge import correctness, evidence, verdict

if TYPE_CHECKING:
    from kernelsweep.evaluator.evaluation import Evaluation
    from kernelsweep.evaluator.sandbox import Worker


def check(ev: Evaluation, ref: Worker, cand: Worker) -> dict[str, Any] | None:
    """The candidate, correct on the task's shape, on each shape variant the
    reference could run (the reference runs each just before): one call
    each, in the same worker. None when it is correct on all of them (it
    goes on to timing)."""
    if not ev.variants:
        return None
    planned = {v["name"]: v for v in ev.variants}
    summary = ev.record["variants"] = {
        "task": shapes.size_constants(ev.reference.read_text(encoding="utf-8")),
        "checked": [], "dropped": [], "failed": None}
    started = time.monotonic()
    try:
        for name, plan in planned.items():
            case, plan, reply, cmp = _run(ev, ref, cand, name, plan)
            if case.get("crowded_out"):  # not dropped: the candidate's memory kept the reference out
                return failed(
                    ev, plan, "out_of_memory", "VariantCrowdedOut",
                    f"the reference could not run it beside the candidate, whose process held "
                    f"{case['crowded_out'] / 2**30:.1f} GiB of device memory ({case['dropped']})")
            if case.get("dropped"):
                summary["dropped"].append({"name": name, "constants": plan["constants"],
                                           "reason": case["dropped"]})
                continue
            if not reply or reply.get("status") != "ok":
                return ev.candidate_stopped(cand, reply, variant=plan)
            if cmp is None:  # said it could not be built on the device, where it was not asked to be
                return failed(ev, plan, "runtime_error", "ProtocolViolation",
                              f"the candidate's worker made no call: {str(reply.get('built_on_host'))[:300]}")
            if "unreadable" in cmp:
                return failed(ev, plan, "runtime_error", "UnreadableOutput",
                              f"its output cannot be read: {cmp['unreadable']}")
            correctness.note_margin(ev, cmp)
            summary["checked"].append({"name": name, "constants": plan["constants"], "ok": cmp["ok"],
                                       "max_abs_diff": cmp["max_abs_diff"], "margin": cmp.get("margin"),
                                       "built_ahead": bool(case.get("built_ahead")),  # before the hold
                                       "built_on_device": bool(case.get("built_on_device")),
                                       **({"rebuilt_on_host": case["rebuilt_on_host"]}
                                          if case.get("rebuilt_on_host") else {}),
                                       "output_handoff": "device" if reply.get("handed") is not None else
                                                         "described" if reply.get("described") is not None
                                                         else "file",
                                       **({"handoff_refused": str(reply["handoff_refused"])[:200]}
                                          if reply.get("handoff_refused") else {}),
                                       **({"narrowed": case["narrowed"]} if case.get("narrowed") else {}),
                                       **({"rounding_off": case["rounding_off"]}
                                          if ev.cfg.profile.scaled and case.get("rounding_off") else {})})
            if not cmp["ok"]:
                return failed(ev, plan, verdict.mismatch_category(cmp["kind"]), "OutputMismatch", cmp["message"])
    finally:
        ev.stage_s["variants"] = round(time.monotonic() - started, 3)
    found = verdict.cheated(ev.flags, ev.log_path())
    return ev.finish(*found) if found else None


def _run(ev: Evaluation, ref: Worker, cand: Worker, name: str,
         plan: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """One variant judged (_judged). Where the reference built Model on the
    device (its task's model too big to build ahead) and ModelNew could not be
    built there, or was wrong built there, both are built again on the host
    and judged so: a ModelNew that draws its weights otherwise on the device
    (a tensor of its own made there first) is judged under KernelBench's
    convention, and `rebuilt_on_host` says why."""
    case, ran, reply, cmp = _judged(ev, ref, cand, name, plan)
    if not case.get("built_on_device") or not reply or reply.get("status") != "ok":
        return case, ran, reply, cmp
    why = reply.get("built_on_host")
    if not why and cmp is not None and not cmp["ok"] and "unreadable" not in cmp:
        why = f"{cmp.get('kind') or 'wrong'} when built on the device"
    if not why:
        return case, ran, reply, cmp
    case, ran, reply, cmp = _judged(ev, ref, cand, name, plan, on_host=True)
    return dict(case, rebuilt_on_host=str(why)[:300]), ran, reply, cmp


def _judged(ev: Evaluation, ref: Worker, cand: Worker, name: str, plan: dict[str, Any],
            on_host: bool = False) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None, dict[str, Any] | None]:
    """The reference, then the candidate, on one variant, and the candidate's
    output compared: (the reference's case, the plan at the sizes it ran, the
    candidate's reply, the comparison). The comparison is None where the
    reference dropped it, the candidate stopped, or ModelNew could not be
    built on the device (`built_on_host`: no call made)."""
    case = _on_reference(ev, ref, name, on_host)
    if case.get("dropped"):
        return case, plan, None, None
    ran = dict(plan, constants=case["constants"]) if case.get("narrowed") else plan  # its batch alone rescaled
    reply = _on_candidate(ev, cand, ran, case)
    if not reply or reply.get("status") != "ok" or reply.get("built_on_host"):
        return case, ran, reply, None
    evidence.note_trial_signals(ev, reply, case)  # every call's, also one judged again on the host
    allowances = settings.rounding_allowances(case.get("rounding"))
    delivered = {way: reply[way] for way in ("handed", "described") if reply.get(way) is not None}
    return case, ran, reply, correctness.compared(ev, ref, [{"name": name, "file": f"{name}.pt", **delivered}],
                                                  allowances)[0]


def _on_reference(ev: Evaluation, ref: Worker, name: str, on_host: bool = False) -> dict[str, Any]:
    """The reference runs one variant (its Model built on the host with ON_HOST)."""
    with ev.spent("variants_reference"):  # where the variants' time goes (diagnostics)
        reply = ref.request("variant", name=name, **({"on_host": True} if on_host else {}))
    ev.reference_ok(ref, reply, f"running shape variant {name}")
    return reply["variant"]


def _on_candidate(ev: Evaluation, cand: Worker, plan: dict[str, Any], case: dict[str, Any]) -> dict[str, Any] | None:
    """The candidate runs one variant, ModelNew built where the reference built Model."""
    with ev.spent("variants_candidate"):  # its output into the buffer the reference lent, if it did
        return cand.request("variant", name=plan["name"], constants=plan["constants"], seed=plan["seed"],
                            handoff=case.get("handoff"), slots=case.get("slots"),
                            on_device=bool(case.get("built_on_device")))


def failed(ev: Evaluation, plan: dict[str, Any], how: str, kind: str, message: str,
           error: dict[str, Any] | None = None) -> dict[str, Any]:
    """Correct on the task's shape, wrong or failing on this variant."""
    shown = ", ".join(f"{k}={v}" for k, v in plan["constants"].items())
    ev.record["variants"]["failed"] = {"name": plan["name"], "constants": plan["constants"],
                                       "category": how, "message": message[:1000]}
    error = dict(error or {"log": ev.log_path()}, type=kind, variant=plan["name"], failure=how,
                 constants=plan["constants"],
                 message=f"correct on the task's shape, but on variant {plan['name']} ({shown}): "
                         f"{how}: {message}")
    return ev.finish("wrong_on_variant", error)
