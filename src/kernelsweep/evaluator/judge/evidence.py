"""Evidence from the candidate's replies, turned into flags and record
fields: the per-call signals of its trials, hooks and patches it set, whether
its kernels ran (launch evidence), their share of the work, and an
implausible speed. Every value comes from the candidate's process, so it is
read as data: bounded, type-checked, never believed beyond what it can show."""

from __future__ import annotations

import math
import statistics
from typing import TYPE_CHECKING, Any

from kernelsweep.core import metrics
from kernelsweep.evaluator import settings

if TYPE_CHECKING:
    from kernelsweep.evaluator.evaluation import Evaluation


def work_share(trials: list[dict[str, Any]]) -> float | None:
    """The share of a call's CPU time spent inside the candidate's extension
    calls (0-1; untrusted/candidate._call_checked): the median over the measured
    trials, from bounded numbers, so that one call's one-time work (a lazy build
    or library load, a first-call cache) does not decide it, nor does one call
    with the kernel among calls without. None when no call was measured."""
    shares = []
    for t in trials:
        cpu = t.get("cpu_ms")
        if isinstance(cpu, dict) and all(type(cpu.get(k)) in (int, float) and math.isfinite(cpu[k]) and cpu[k] >= 0
                                         for k in ("inside", "call")) and cpu["call"] > 0:
            shares.append(min(1.0, cpu["inside"] / cpu["call"]))
    if not shares:
        return None
    return round(statistics.median(shares), 4)


def launched(report: dict[str, Any]) -> dict[str, Any]:
    """Launch evidence from the judged calls themselves: calls into the
    candidate's extension modules. Only a candidate without any (Triton,
    custom ops) is judged by a profiled call, which it could tell apart."""
    calls = report.get("extension_calls") or {}
    observed = report.get("launch") or {}
    ran = bool(calls) if report.get("extension_modules") else bool(observed.get("launched"))
    return {"launched": ran, "extension_calls": calls,
            "kernels": observed.get("kernels", []), "custom_ops": observed.get("custom_ops", []),
            "other_kernels": observed.get("other_kernels", [])}


def note_kernel(ev: Evaluation, report: dict[str, Any]) -> bool:
    """Record the launch evidence and the work share (the CPU's, measured in
    the trials, else the GPU's profiled one); flag a share below
    settings.KERNEL_SHARE_MIN. Returns whether the kernels ran."""
    evidence = ev.record["kernel_evidence"]
    found = evidence["launched"] = launched(report)
    share = evidence.get("share")
    if share is None and (report.get("launch") or {}).get("share") is not None:
        share = evidence["share"] = report["launch"]["share"]
    if found["launched"] and share is not None and share < settings.KERNEL_SHARE_MIN:
        ev.flags.append("kernel_share_low")
    return found["launched"]


def _counted_beyond_measured(cpu: Any) -> bool:
    """The time inside the extension's calls is measured within the call's own
    span, on the same clock, and what is left of it once torch's operators are
    taken out is less again: a count beyond either is one the candidate wrote."""
    if not isinstance(cpu, dict):
        return False
    values = [cpu.get(k) for k in ("inside", "inside_raw", "call_raw")]
    if not all(type(v) in (int, float) for v in values):
        return False
    inside, raw, call = values
    return inside > raw or raw > call


def note_trial_signals(ev: Evaluation, trial: dict[str, Any], case: dict[str, Any]) -> None:
    """A call's own signals (untrusted/candidate._call_checked), against the
    reference's on the same case (`case`: what the reference does itself)."""
    if trial["mutates_inputs"] and not case["mutates_inputs"]:
        ev.flags.append("mutates_inputs")
    if trial["aliases_inputs"] and not case["aliases_inputs"]:
        ev.flags.append("returns_input")
    if trial["reuses_output_storage"]:
        ev.flags.append("reuses_output_storage")
    if trial["changed_after_return"]:
        ev.flags.append("output_changed_after_return")
    if not trial["plain"]:
        ev.flags.append("non_plain_output")
    if not trial.get("on_device", True):
        ev.flags.append("output_not_on_device")
    if _counted_beyond_measured(trial.get("cpu_ms")) and "report_tampered" not in ev.flags:
        ev.flags.append("report_tampered")
    note_hooks(ev, trial)


def note_hooks(ev: Evaluation, reply: dict[str, Any]) -> None:
    """Profile, trace or monitoring hooks were set while the harness's own
    code ran after a call (untrusted/hooks.py): candidate code inside it."""
    if reply.get("hooks") and "interpreter_hooks" not in ev.flags:
        ev.flags.append("interpreter_hooks")


def note_patches(ev: Evaluation, report: dict[str, Any]) -> None:
    """What the guard saw patched, global settings changed and reduced-precision modes set."""
    record = ev.record
    if report.get("patched_harness"):
        ev.flags.append("patched_harness")
    if report.get("patched_torch"):
        ev.flags.append("patched_torch")
    if report.get("settings_changed"):
        ev.flags.append("changed_global_settings")
        record["settings_changed"] = sorted(set(record.get("settings_changed") or []) |
                                            set(report["settings_changed"]))
    lowered = report.get("reduced_precision")
    if lowered:
        # What it did (autocast, TF32): from the candidate's process, so bounded here.
        shown = [str(x)[:100] for x in lowered[:20]] if isinstance(lowered, list) else ["(unreadable)"]
        ev.flags.append("reduced_precision_math")
        record["reduced_precision"] = sorted(set(record["reduced_precision"]) | set(shown))
    record["patched"] = sorted(set(record.get("patched") or []) |
                               set(report.get("patched_harness", [])) |
                               set(report.get("patched_torch", [])))[:20]


def implausibly_fast(cand_ms: list[float], speedup: float | None, output_bytes: int, *, speedup_bound: float,
                     peak_bytes_per_s: float) -> bool:
    """Beyond the configured speedup bound, or faster than writing the
    output at twice the device's peak bandwidth allows."""
    if not cand_ms or any(not math.isfinite(x) or x <= 0 for x in cand_ms):
        return True
    if speedup is not None and speedup > speedup_bound:
        return True
    return metrics.median(cand_ms) < output_bytes / (2.0 * peak_bytes_per_s) * 1e3
