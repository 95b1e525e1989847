"""The verdict: a pure function of typed evidence, nothing else. No worker,
device, file or clock is consulted here; the duties (correctness.py,
variants.py, timing.py, evidence.py) gather the evidence and the evaluation
(evaluation.py) records what is decided. Each function returns
(category, error), or None where the candidate goes on to the next duty."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kernelsweep.evaluator import cheats

Verdict = tuple[str, "dict[str, Any] | None"]

# A wide CPU interval still decides when it lies wholly beyond CLEAR_RATIO either way.
UNSTABLE_WIDTH = 2.0       # speedup interval hi/lo beyond which a CPU timing gives no verdict...
CLEAR_RATIO = 1.5          # ...unless the whole interval lies beyond 1.5x either way
SHAPE_KINDS = ("structure", "shape", "dtype")  # compare.compare_outputs kinds that are not wrong values
SPEED_CATEGORIES = {"faster": "correct_faster", "slower": "correct_slower"}  # anything else: a tie


def mismatch_category(kind: str) -> str:
    """A comparison that failed: the output's form (`shape_mismatch`) or its values (`wrong_output`)."""
    return "shape_mismatch" if kind in SHAPE_KINDS else "wrong_output"


def cheat_error(flags: list[str] | tuple[str, ...], log: str | None) -> dict[str, Any]:
    return {"type": "Cheat", "message": "detected: " + ", ".join(cheats.cheats_among(flags)), "log": log}


def cheated(flags: list[str] | tuple[str, ...], log: str | None) -> Verdict | None:
    """`cheat` when any flag so far is a cheat (cheats.FLAGS)."""
    return ("cheat", cheat_error(flags, log)) if cheats.cheats_among(flags) else None


@dataclass(frozen=True)
class Mismatch:
    """The first trial whose output did not match: compare.compare_outputs's kind and message."""
    trial: int
    kind: str
    message: str


@dataclass(frozen=True)
class TrialsEvidence:
    """What the correctness trials showed. `missing`: the first trial without
    an output; `tampered` / `unreadable`: the first trial whose output file
    was not a regular file / could not be read (comparison stops there), with
    why; `constant`: the reference's outputs do not depend on its inputs."""
    flags: tuple[str, ...]
    log: str | None
    missing: int | None = None
    tampered: int | None = None
    unreadable: tuple[int, str] | None = None
    mismatch: Mismatch | None = None
    constant: bool = False


def trials_verdict(e: TrialsEvidence) -> Verdict | None:
    """The trials' verdict; None when the candidate goes on to the shape variants."""
    if e.missing is not None:
        return "runtime_error", {"type": "MissingOutput", "log": e.log, "message": f"no output for trial {e.missing}"}
    if e.tampered is not None:
        return "cheat", cheat_error(e.flags, e.log)
    if e.unreadable is not None:
        i, why = e.unreadable
        return "runtime_error", {"type": "UnreadableOutput", "log": e.log,
                                 "message": f"trial {i} output cannot be read: {why}"}
    if e.mismatch is not None and "output_changed_after_return" in e.flags:
        return "cheat", cheat_error(e.flags, e.log)  # work kept running past forward's return
    if e.mismatch is not None:
        return mismatch_category(e.mismatch.kind), {"type": "OutputMismatch", "log": e.log,
                                                    "message": f"trial {e.mismatch.trial}: {e.mismatch.message}"}
    found = cheated(e.flags, e.log)
    if found:
        return found
    if e.constant:  # no variant or timing: neither can make a match on this task mean more
        return "indistinguishable", {
            "type": "ConstantReference", "log": e.log,
            "message": "the outputs match, but the reference's do not depend on its inputs: a constant "
                       "answer would match as well, so this task cannot tell the candidate from one"}
    return None


@dataclass(frozen=True)
class TimedEvidence:
    """What a correct candidate's timing and kernel evidence showed.
    `timing_verdict`: metrics.compare_timings's faster / tie / slower;
    `speedup_ci`: its interval (None without one); `defines_kernel`: the
    source defines a kernel for the device (static); `launched`: the judged
    calls ran it (evidence.launched); `failed_builds`: the names of the
    extensions that did not build (a candidate may catch that and fall back);
    `share`: its kernels' share of the work, where measured."""
    device: str
    flags: tuple[str, ...]
    defines_kernel: bool
    launched: bool
    timing_verdict: str | None
    speedup_ci: tuple[float, float] | None
    log: str | None
    failed_builds: tuple[str, ...] = ()
    share: float | None = None


def is_custom_kernel(e: TimedEvidence) -> bool:
    return bool(e.defines_kernel and e.launched and not set(e.flags) & cheats.NOT_A_KERNEL_FLAGS)


def not_custom_error(e: TimedEvidence) -> dict[str, Any]:
    """Why a correct candidate is not credited with a custom kernel: the first
    reason that holds, so a reader (or the model, in its feedback) sees a
    caught build failure or a fallback path instead of a bare category."""
    kinds = "CUDA, Triton or other device kernel" if e.device == "cuda" else "native (C++/CUDA) code"
    flags = sorted(set(e.flags) & cheats.NOT_A_KERNEL_FLAGS)
    if not e.defines_kernel:
        message = f"the source defines no {kinds}: the work is PyTorch's"
    elif not e.launched and e.failed_builds:
        message = (f"its extension(s) {', '.join(sorted(set(e.failed_builds)))} did not build; the judged calls "
                   f"ran without them (a fallback path)")
    elif not e.launched:
        message = "its kernels are defined but the judged calls did not run them (a fallback path)"
    elif flags:
        share = "" if e.share is None else f" (share of the work {e.share:.2f})"
        message = "; ".join(cheats.FLAGS[f].meaning for f in flags) + share
    else:
        message = "not credited with a custom kernel"
    return {"type": "NoCustomKernel", "message": message, "log": e.log}


def is_unstable(e: TimedEvidence) -> bool:
    """On a shared CPU: an interval too wide for a verdict, and not clearly away from 1."""
    ci = e.speedup_ci
    clear = ci and (ci[0] > CLEAR_RATIO or ci[1] < 1 / CLEAR_RATIO)  # a wide interval far from 1 still decides
    return bool(e.device == "cpu" and ci and ci[0] > 0 and ci[1] / ci[0] > UNSTABLE_WIDTH and not clear)


def timed_verdict(e: TimedEvidence) -> Verdict:
    """The final verdict of a numerically correct candidate."""
    found = cheated(e.flags, e.log)
    if found:
        return found
    custom = is_custom_kernel(e)
    if not custom:
        return "no_custom_kernel", not_custom_error(e)
    if is_unstable(e):
        return "correct_unstable", None
    return SPEED_CATEGORIES.get(e.timing_verdict or "", "correct_tie"), None
