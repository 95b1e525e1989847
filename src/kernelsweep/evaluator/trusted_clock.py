"""The timings the candidate's process reports, checked against a clock it
cannot touch (parent side).

The parent measures its own wall window around each timed block it asks
for: from sending the command to reading the reply. A block's window holds
its calls' claimed times plus the harness's own work around them (making
the inputs, flushing the cache, keeping each output, the replies), which
the reference's block on the same inputs, timed the same way, measures.
Work the candidate moves out of its timed spans (into the harness's code
that runs after a call, hooks, finalizers, other threads) still lands in
the window: what the claimed times cannot explain, beyond the reference's
own unexplained time, is the candidate's hidden time.

hidden per call = median over blocks of
    [(window_c - excused_c - sum claimed_c) - (window_r - excused_r - sum claimed_r)] / calls
where a block's excused time is what the scheduler kept that worker waiting
for other jobs (run_queue.py): on a loaded host, the machine's share of the
window, never the worker's own threads' or processes', and never more than
the window's time outside the claimed calls (a wait is counted when the
thread next runs, so one begun before the block can outlast it).
When three blocks in four show it beyond the noise bound (the reference's
own block-to-block spread of unexplained time, never below HIDDEN_FLOOR_MS),
over at least MIN_BLOCKS block pairs, it is flagged `timing_unaccounted`. On
the CPU, where each call's timer holds all of its work, it is also charged to every timed call of the candidate
(`charged_ms_per_call`), so its speed is judged by the time the parent saw
pass, not the time it claimed (judge/timing.py). On a GPU the flag is
informational: CUDA events time the device, and an honest extension's host
work before its launch (hidden behind the cache flush, as in any event-timed
benchmark) shows up here as ~0.1 ms a call
(docs/decisions/2026-12-05-trusted-clock-charges.md). Noise alone is never
charged. The candidate's trusted time per call (its window less the
reference's overhead) is recorded either way, and so is the CPU time its
other threads and processes used per call beyond the reference's
(`other_threads_ms_per_call`): work a helper does on another core, beside the
harness's, does not lengthen the window. On the CPU, where both sides are
held to one thread, that time beyond the same noise rule is judged and
charged too; on a GPU (driver and compiler threads) it is only recorded
(docs/decisions/2026-12-07-other-threads-charged-on-the-cpu.md)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

HIDDEN_FLOOR_MS = 0.05   # below this per call, hidden time is never judged
NOISE_SPREADS = 4.0      # ...nor below this many of the reference's spreads
MIN_BLOCKS = 6           # ...nor from fewer block pairs (no spread to speak of)


@dataclass(frozen=True)
class Block:
    """One timed block: the parent's window, the worker's claimed times, and
    the part of the window the scheduler kept the worker waiting for other
    jobs (run_queue.py: the machine's load, not the worker's work)."""
    window_ms: float
    claimed_ms: Sequence[float]
    excused_ms: float = 0.0
    others_ms: float | None = None  # CPU time of the worker's other threads and processes (None: not known)

    @property
    def excused_in_window_ms(self) -> float:
        """The excused wait, at most the window's time outside the claimed
        calls: the kernel adds a wait to the thread's count when the thread
        next runs, so a wait that began before the block (the worker woken
        by SIGCONT behind another job) is counted in the block it ends in."""
        return min(self.excused_ms, max(0.0, self.window_ms - float(sum(self.claimed_ms))))

    @property
    def unexplained_ms(self) -> float:
        return self.window_ms - self.excused_in_window_ms - float(sum(self.claimed_ms))


def _beyond(values: list[float], spread_of: list[float]) -> tuple[float, bool]:
    """The noise bound (NOISE_SPREADS times the interquartile spread of
    SPREAD_OF, the reference's, never below HIDDEN_FLOOR_MS), and whether
    three values in four exceed it over at least MIN_BLOCKS block pairs: work
    moved out of the timed spans shows in every block, a loaded machine
    pausing the candidate in a few."""
    q75, q25 = np.percentile(spread_of, [75, 25]) if len(spread_of) > 1 else (0.0, 0.0)
    noise = max(HIDDEN_FLOOR_MS, NOISE_SPREADS * float(q75 - q25))
    return noise, len(values) >= MIN_BLOCKS and float(np.percentile(values, 25)) > noise


def audit(reference: Sequence[Block], candidate: Sequence[Block], *,
          charge: bool) -> dict[str, float | bool | None]:
    """Blocks paired in order (the same inputs on both sides). Returns the
    candidate's hidden and trusted time per call, the noise bound used,
    whether the hidden time is beyond it, and, with CHARGE (the CPU target),
    the time per call `charged` adds to each timed call. With CHARGE, the CPU
    time the candidate's other threads and processes use beyond the
    reference's is judged the same way: the reference is held to one thread,
    and a helper working on another core beside the harness does not lengthen
    the window; the larger of the two is charged (the same work can show in
    both)."""
    pairs = [(r, c) for r, c in zip(reference, candidate) if c.claimed_ms and r.claimed_ms]
    if not pairs:
        return {"hidden_ms_per_call": None, "trusted_ms_per_call": None, "noise_ms_per_call": None,
                "claimed_ms_per_call": None, "excused_ms_per_call": None, "other_threads_ms_per_call": None,
                "unaccounted": False, "charged_ms_per_call": 0.0}
    hidden = [(c.unexplained_ms - r.unexplained_ms) / len(c.claimed_ms) for r, c in pairs]
    overhead = [r.unexplained_ms / len(r.claimed_ms) for r, _ in pairs]
    trusted = [((c.window_ms - c.excused_in_window_ms) / len(c.claimed_ms)) - o for (_, c), o in zip(pairs, overhead)]
    excused = float(np.median([c.excused_in_window_ms / len(c.claimed_ms) for _, c in pairs]))
    known = [(r, c) for r, c in pairs if c.others_ms is not None and r.others_ms is not None]
    elsewhere = [(c.others_ms - r.others_ms) / len(c.claimed_ms) for r, c in known]
    noise, hidden_beyond = _beyond(hidden, overhead)
    _, elsewhere_beyond = _beyond(elsewhere, [r.others_ms / len(r.claimed_ms) for r, _ in known])
    claimed = float(np.median([x for _, c in pairs for x in c.claimed_ms]))
    excess = float(np.median(hidden))
    other = float(np.median(elsewhere)) if elsewhere else None
    # Judged: hidden time on every target, other threads' time on the CPU only.
    charges = ([excess] if hidden_beyond else []) + ([other] if elsewhere_beyond and charge else [])
    return {"hidden_ms_per_call": round(excess, 6), "trusted_ms_per_call": round(float(np.median(trusted)), 6),
            "noise_ms_per_call": round(noise, 6), "claimed_ms_per_call": round(claimed, 6),
            "excused_ms_per_call": round(excused, 6),
            "other_threads_ms_per_call": round(other, 6) if other is not None else None,
            "unaccounted": bool(charges), "charged_ms_per_call": round(max(charges), 6) if charges and charge else 0.0}


def charged(claimed_ms: Sequence[float], audit: dict) -> list[float]:
    """The candidate's timed calls as judged: each claimed time plus the
    hidden time per call the audit charges (none within the noise)."""
    extra = audit.get("charged_ms_per_call") or 0.0
    return [ms + extra for ms in claimed_ms]
