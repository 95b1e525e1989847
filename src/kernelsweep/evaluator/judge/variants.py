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
            with ev.spent("variants_reference"):  # where the variants' time goes (diagnostics)
                reply = ref.request("variant", name=name)
            ev.reference_ok(ref, reply, f"running shape variant {name}")
            case = reply["variant"]
            if case.get("crowded_out"):  # not dropped: the candidate's memory kept the reference out
                return failed(
                    ev, plan, "out_of_memory", "VariantCrowdedOut",
                    f"the reference could not run it beside the candidate, whose process held "
                    f"{case['crowded_out'] / 2**30:.1f} GiB of device memory ({case['dropped']})")
            if case.get("dropped"):
                summary["dropped"].append({"name": name, "constants": plan["constants"],
                                           "reason": case["dropped"]})
                continue
            if case.get("narrowed"):  # the reference could run only its batch rescaled
                plan = dict(plan, constants=case["constants"])
            with ev.spent("variants_candidate"):  # its output into the buffer the reference lent, if it did
                reply = cand.request("variant", name=name, constants=plan["constants"], seed=plan["seed"],
                                     handoff=case.get("handoff"), slots=case.get("slots"))
            if not reply or reply.get("status") != "ok":
                return ev.candidate_stopped(cand, reply, variant=plan)
            evidence.note_trial_signals(ev, reply, case)
            allowances = settings.rounding_allowances(case.get("rounding"))
            delivered = {way: reply[way] for way in ("handed", "described") if reply.get(way) is not None}
            cmp = correctness.compared(ev, ref, [{"name": name, "file": f"{name}.pt", **delivered}], allowances)[0]
            if "unreadable" in cmp:
                return failed(ev, plan, "runtime_error", "UnreadableOutput",
                              f"its output cannot be read: {cmp['unreadable']}")
            correctness.note_margin(ev, cmp)
            summary["checked"].append({"name": name, "constants": plan["constants"], "ok": cmp["ok"],
                                       "max_abs_diff": cmp["max_abs_diff"], "margin": cmp.get("margin"),
                                       "built_ahead": bool(case.get("built_ahead")),  # before the hold
                                       "output_handoff": "device" if "handed" in delivered else
                                                         "described" if "described" in delivered else "file",
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
