"""Timing a correct candidate against the reference: each side times its own
calls in its own process, in alternating blocks on fresh secret inputs, the
candidate frozen while the reference runs; the parent's own window around
each block (trusted_clock.py), outputs of secretly drawn timed calls checked
after each block, a sentinel for work left running past the end event, and
the blame for a slowed reference. Returns the measurements (Timed); the
verdict is drawn from them elsewhere (verdict.py)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kernelsweep.core import metrics
from kernelsweep.evaluator import run_queue, settings, source, trusted_clock
from kernelsweep.evaluator.judge import correctness, draws, evidence

if TYPE_CHECKING:
    from kernelsweep.evaluator.evaluation import Evaluation
    from kernelsweep.evaluator.sandbox import Worker

BLOCK_CALLS = {"cuda": 10, "cpu": 2}  # timed calls per block: on a shared CPU, finer interleaving
# Timed calls whose outputs are compared with the reference's, drawn in secret
# among all timed calls (the armed call comes on top). Each check moves an
# output per side and compares it, with the device held; checking outputs of
# hundreds of MiB whole would cost more than the timing itself, so big outputs
# are checked on sampled elements (trees.SAMPLED_ELEMENTS, a few MiB per call;
# docs/decisions/2026-12-02-timed-output-checks.md).
# A candidate wrong in half of its timed calls escapes with p = 2 ** -12.
CHECKED_CALLS = 12
SENTINEL_CALLS = 5         # candidate calls timed with a full synchronize, to find hidden work
SENTINEL_CONFIRMATIONS = 2 # ...and again on the next calls before it is believed (host load delays some once)
HIDDEN_WORK_RATIO = 1.5    # sentinel median over event median beyond which work escapes the end event
HIDDEN_WORK_MIN_MS = 0.02
SLOWED_RATIO = {"cuda": 1.3, "cpu": 2.0}  # reference beside the candidate over alone: a cheat beyond
BLAME_CALLS = 10           # reference calls timed on each side of ending the candidate, to blame a slowdown


@dataclass
class Timed:
    """The timing's measurements (ms per call) and the candidate's final report."""
    report: dict[str, Any]
    alone: list[float]       # the reference before the candidate ever ran a timed call
    ref_ms: list[float]
    cand_ms: list[float]
    synchronized: bool       # redone with a full synchronize (unsynchronized_work)


def slower(ms: list[float], than: list[float], ratio: float) -> bool:
    """Timings `ms` slower than `than` by more than `ratio` (and 10 µs)."""
    return metrics.median(ms) > ratio * metrics.median(than) + 0.01


def block_calls(device: str, input_bytes: int, output_bytes: int) -> int:
    """Timed calls per block: as many as BLOCK_CALLS, within the device's
    timing budget (settings.TIMING_POOL_BYTES). A block's inputs are made
    before its calls, and the candidate keeps a clone of every output until
    the block ends (the calls to check are drawn after it), so both count:
    sized by inputs alone, a task with small inputs and GiB-sized outputs
    would put an honest candidate out of device memory
    (docs/decisions/2026-12-02-timing-blocks.md)."""
    per_call = max(1, input_bytes + output_bytes)
    return max(1, min(BLOCK_CALLS[device], settings.TIMING_POOL_BYTES[device] // per_call))


def slowdown_is_the_candidates(beside: list[float], after: list[float], alone: list[float], ratio: float) -> bool:
    """The reference, timed beside the candidate and right after it ended:
    slow beside it, and fast again once it is gone. Both blocks are adjacent in
    time, so load from elsewhere affects them alike. Slow in three calls in
    four beside it: what the candidate leaves running slows every call, a burst
    of load from elsewhere a few (a loaded CI machine made an honest kernel a
    cheat on the median)."""
    most = [float(np.percentile(beside, 25))] if beside else []
    return slower(most, alone, ratio) and slower(most, after, ratio) and not slower(after, alone, ratio)


def run(ev: Evaluation, ref: Worker, cand: Worker, manifest: dict[str, Any]) -> Timed | dict[str, Any]:
    """Time both sides; a finished record when the candidate stopped meanwhile."""
    cfg = ev.cfg
    t_start = time.monotonic()
    # Every timed call gets inputs of its own secret seed, made just before
    # its block (no input is seen twice, so no answer can be remembered); a
    # block holds as many calls as their inputs and kept outputs fit (block_calls).
    seeds = [draws.secret_seed() for _ in range(cfg.timing_trials + cfg.warmup)]
    ev.seeds["timing"] = seeds
    size = block_calls(cfg.device, manifest["input_bytes"], max(t["output_bytes"] for t in manifest["trials"]))
    ev.record.setdefault("timing", {})["block_calls"] = size
    timed = seeds[cfg.warmup:]
    blocks = [timed[i:i + size] for i in range(0, len(timed), size)]
    # The candidate's clock flushes as many bytes as the reference's, sized in the reference's worker.
    step = cand.request("clock", flush_bytes=manifest["flush_bytes"])
    if not step or step.get("status") != "ok":
        return ev.candidate_stopped(cand, step)
    idle = run_queue.cpu_idle_ticks() if cfg.device == "cpu" else None
    for i in range(0, cfg.warmup, size):  # in blocks too: 10 sets of 8 GiB inputs at once do not fit
        with ev.spent("timing_warmup"):
            r_warm, c_warm = _both(ref, cand, "warmup", seeds=seeds[i:min(i + size, cfg.warmup)])
        if not c_warm or c_warm.get("status") != "ok":
            return ev.candidate_stopped(cand, c_warm)
        ev.reference_ok(ref, r_warm, "warming up")
    if idle is not None:
        ev.timing_cpu = _timing_cpu(ref, cand, idle)
        if ev.timing_cpu is not None:
            ev.record["timing"]["cpu"] = ev.timing_cpu
    verify = not any(t["mutates_inputs"] for t in manifest["trials"])
    alone = _ref_block(ev, ref, cand, blocks[0], False)  # before the candidate ever ran a timed call
    ref_ms, cand_ms = [], []
    checked = set(ev.rng.sample(range(len(timed)), min(len(timed), CHECKED_CALLS)))
    armed_block = ev.rng.randrange(len(blocks))
    extension_used = any(t.get("extension_calls") for t in ev.trial_signals)
    ref_windows: list[trusted_clock.Block] = []
    cand_windows: list[trusted_clock.Block] = []
    for b, block in enumerate(blocks):
        ref_ms += _ref_block(ev, ref, cand, block, False, ref_windows)
        armed_at = ev.rng.randrange(len(block)) if b == armed_block else None
        reply = _cand_block(ev, cand, cand_windows, manifest["flush_bytes"], seeds=block, armed_at=armed_at)
        if not reply or reply.get("status") != "ok":
            return ev.candidate_stopped(cand, reply)
        cand_ms += reply["ms"]
        evidence.note_hooks(ev, reply)
        if not reply["plain"]:
            ev.flags.append("non_plain_output")
        positions = [p for p in range(len(block)) if b * size + p in checked]
        if armed_at is not None:
            if extension_used and not reply.get("perturbed_calls"):
                ev.flags.append("kernel_unused_when_timed")  # the extension did not run in that call
            if armed_at not in positions:
                positions.append(armed_at)
        if verify and positions:
            names = [f"timed_b{b}_{p}.pt" for p in positions]
            sample_seed = ev.rng.randrange(2**31)  # sent after the calls: positions unknown before
            with ev.spent("timing_checks"):
                # Both sides at once: nothing is timed meanwhile, and neither reads the other's files.
                saving = cand.send("save", positions=positions, names=names, sample_seed=sample_seed)
                computing = ref.send("outputs", seeds=[block[p] for p in positions], names=names,
                                     sample_seed=sample_seed)
                saved = cand.reply(saving)
                if not saved:
                    return ev.candidate_stopped(cand, None)
                evidence.note_hooks(ev, saved)
                ev.reference_ok(ref, ref.reply(computing), "saving outputs for the timed checks")
                # Checked now, then removed: the window to rewrite a saved
                # output is one block, and big outputs never pile up on disk.
                _check_timed_outputs(ev, ref, [(name, p == armed_at and bool(reply.get("perturbed_calls")))
                                               for p, name in zip(positions, names)])
    synchronized = False
    if cfg.device == "cuda":
        with ev.spent("timing_sentinels"):
            synchronized = _hidden_work(ev, ref, cand, blocks[0], ref_ms, cand_ms)
        if synchronized:
            ref_ms, cand_ms, ref_windows, cand_windows = [], [], [], []
            for block in blocks:
                ref_ms += _ref_block(ev, ref, cand, block, True, ref_windows)
                reply = _cand_block(ev, cand, cand_windows, manifest["flush_bytes"], seeds=block, synchronized=True)
                if not reply or reply.get("status") != "ok":
                    return ev.candidate_stopped(cand, reply)
                cand_ms += reply["ms"]
    # One profiled call (source.profiled): its kernels' share of the device time (the
    # work share), and the launch evidence where no extension module was built to
    # count calls into (Triton, a custom op).
    with ev.spent("timing_report"):
        report = cand.request("report", observe=source.profiled(ev.src.evidence, cfg.device))
    if not report or report.get("status") != "ok":
        return ev.candidate_stopped(cand, report)
    if extension_used and cfg.device == "cpu":
        ev.record["kernel_evidence"]["share"] = evidence.work_share(ev.trial_signals)
    audit = trusted_clock.audit(ref_windows, cand_windows, charge=cfg.device == "cpu")
    ev.record.setdefault("timing", {})["windows"] = audit
    if audit["unaccounted"]:
        ev.flags.append("timing_unaccounted")
        cand_ms = trusted_clock.charged(cand_ms, audit)  # on the CPU, judged by the parent's clock
    if not synchronized and _slowed(ev, ref_ms, alone):
        _blame_slowdown(ev, ref, cand, blocks[:max(1, BLAME_CALLS // size)], alone)
    ev.stage_s["timing"] = round(time.monotonic() - t_start, 3)
    return Timed(report, alone, ref_ms, cand_ms, synchronized)


def record(ev: Evaluation, timed: Timed) -> dict[str, Any]:
    """The timings and their comparison (metrics.compare_timings) into the record; returns the comparison."""
    ref_ms, cand_ms = timed.ref_ms, timed.cand_ms
    ev.record["runtime_ms"] = dict(metrics.summarize(cand_ms), samples=cand_ms)
    ev.record["ref_runtime_ms"] = dict(metrics.summarize(ref_ms), samples=ref_ms)
    comparison = metrics.compare_timings(ref_ms, cand_ms, ev.cfg.equivalence_margin)
    ev.record.update(speedup=comparison["speedup"], speedup_ci=comparison["speedup_ci"],
                     timing_verdict=comparison["verdict"], faster=comparison["faster"])
    ev.record.setdefault("timing", {}).update(
        inputs="fresh per call", synchronized=timed.synchronized,
        reference_alone_ms=metrics.median(timed.alone))
    return comparison


def _both(ref: Worker, cand: Worker, op: str, **args: Any) -> tuple[dict | None, dict | None]:
    a, b = ref.send(op, **args), cand.send(op, **args)
    return ref.reply(a), cand.reply(b)


def _timing_cpu(ref: Worker, cand: Worker, idle: dict[int, int]) -> int | None:
    """The CPU both workers time on (run_queue.py): the one idlest since IDLE,
    or None where either worker cannot be held to it (their timing is then
    left to the scheduler, as on a GPU)."""
    cpu = run_queue.idlest_cpu(idle, run_queue.cpu_idle_ticks())
    if cpu is None or not (ref.pin(cpu) and cand.pin(cpu)):
        return None
    return cpu


def _ref_block(ev: Evaluation, ref: Worker, cand: Worker | None, seeds: list[int], synchronized: bool,
               windows: list[trusted_clock.Block] | None = None) -> list[float]:
    """The reference's timed calls, the candidate frozen meanwhile; cand is
    None once the candidate has ended (nothing to freeze, and its pids may
    be reused by now). WINDOWS gets the block's window (trusted_clock.py)."""
    with ev.spent("timing_reference"):
        if cand is not None:
            cand.freeze()
        try:
            reply, _ = _timed_block(ref, windows, ev.timing_cpu, seeds=seeds, synchronized=synchronized)
        finally:
            if cand is not None:
                cand.thaw()
    ev.reference_ok(ref, reply, "being timed" if cand is not None else "being timed again")
    return reply["ms"]


def _timed(reply: dict | None) -> bool:
    return bool(reply) and reply.get("status") == "ok" and isinstance(reply.get("ms"), list)


def _timed_block(worker: Worker, windows: list[trusted_clock.Block] | None, cpu: int | None,
                 **args: Any) -> tuple[dict | None, bool]:
    """A timed block's request; its reply, and whether the worker's timing
    thread left CPU during it. With WINDOWS, the block's window is kept
    there: the parent's own clock around the request, the part of it the
    scheduler kept the worker waiting for other jobs, and the CPU time of
    the worker's other threads and processes. With CPU (the CPU target),
    the worker is held to that CPU first (run_queue.py)."""
    if cpu is not None:
        worker.pin(cpu)  # again: whatever the worker changed since, and threads it started
    sampled = windows is not None or cpu is not None
    before = worker.scheduler_sample() if sampled else None
    sent = time.monotonic()
    reply = worker.request("block", **args)
    window_ms = (time.monotonic() - sent) * 1e3
    if not (sampled and _timed(reply)):
        return reply, False
    after = worker.scheduler_sample()
    if windows is not None:
        windows.append(trusted_clock.Block(window_ms, reply["ms"], run_queue.excused_ms(before, after),
                                           run_queue.others_ms(before, after)))
    return reply, cpu is not None and run_queue.left_cpu(before, after, cpu)


def _cand_block(ev: Evaluation, cand: Worker, windows: list[trusted_clock.Block], flush_bytes: int,
                **args: Any) -> dict | None:
    """The candidate's timed calls, its block's window kept (trusted_clock.py)."""
    with ev.spent("timing_candidate"):
        reply, left = _timed_block(cand, windows, ev.timing_cpu, **args)
    if left and "left_timing_cpu" not in ev.flags:
        ev.flags.append("left_timing_cpu")
    if _timed(reply):
        # The clock the parent set up: events on a GPU, the flush it sent. Another
        # is the candidate's change to the harness's clock, not a timing.
        used = reply.get("clock")
        expected = {"events": ev.cfg.device == "cuda", "flushed_bytes": flush_bytes}
        if used != expected and "patched_harness" not in ev.flags:
            ev.flags.append("patched_harness")
    return reply


def _slowed(ev: Evaluation, ref_ms: list[float], alone: list[float]) -> bool:
    return slower(ref_ms, alone, SLOWED_RATIO[ev.cfg.device])


def _blame_slowdown(ev: Evaluation, ref: Worker, cand: Worker, blocks: list[list[int]], alone: list[float]) -> None:
    """The reference ran slower beside the candidate than before it. Its
    report is in, so time the reference once more beside the candidate
    (each block after a block of the candidate's calls, as in the timing),
    end the candidate (and all it started) and time it again at once: only
    a slowdown that goes away with the candidate, between these adjacent
    measurements, is the candidate's doing. Load from elsewhere that came
    during the timing and went (other jobs on a shared node) slows both
    alike, or neither, and is recorded, not a verdict."""
    beside: list[float] = []
    for block in blocks:
        with ev.spent("timing_candidate"):
            reply, _ = _timed_block(cand, None, ev.timing_cpu, seeds=block)
        if not reply or reply.get("status") != "ok":
            beside = []  # it would not run again: judged by the reference after it alone
            break
        beside += _ref_block(ev, ref, cand, block, False)
    cand.abort()
    cand.wait()
    after = [ms for block in blocks for ms in _ref_block(ev, ref, None, block, False)]
    timing = ev.record.setdefault("timing", {})
    timing["reference_after_candidate_ms"] = metrics.median(after)
    if beside:
        timing["reference_beside_candidate_ms"] = metrics.median(beside)
        blamed = slowdown_is_the_candidates(beside, after, alone, SLOWED_RATIO[ev.cfg.device])
    else:
        blamed = not _slowed(ev, after, alone)
    if blamed:
        ev.flags.append("reference_slowed")


def _check_timed_outputs(ev: Evaluation, ref: Worker, checks: list[tuple[str, bool]]) -> None:
    """The drawn timed calls' outputs against the reference's; (name, perturbed) per call."""
    results = correctness.compared(ev, ref, [{"name": name, "file": name} for name, _ in checks])
    for (_, perturbed), cmp in zip(checks, results):
        if cmp.get("tampered"):
            ev.flags.append("output_file_tampered")
        elif "unreadable" in cmp:
            ev.flags.append("timing_output_mismatch")
        elif perturbed and cmp["ok"]:
            ev.flags.append("kernel_unused_when_timed")
        elif not perturbed and not cmp["ok"]:
            ev.flags.append("timing_output_mismatch")


def _hidden_work(ev: Evaluation, ref: Worker, cand: Worker, seeds: list[int], ref_ms: list[float],
                 cand_ms: list[float]) -> bool:
    """Does a call leave work running past its end event? Time a few calls
    of each side with a full device synchronize before the end event: the
    synchronize itself costs both sides alike, so only the candidate's
    excess over the reference's counts. A first excess is confirmed on the
    next calls: a burst of host load (the corpus's own builds beside it)
    delays a few synchronized calls once, work that escapes the end event
    does it every time."""
    for attempt in range(SENTINEL_CONFIRMATIONS):
        sentinel = seeds[attempt * SENTINEL_CALLS:(attempt + 1) * SENTINEL_CALLS]
        if len(sentinel) < SENTINEL_CALLS:  # a short first block: its first calls again
            sentinel = seeds[:SENTINEL_CALLS]
        ref_synced = metrics.median(_ref_block(ev, ref, cand, sentinel, True))
        reply = cand.request("block", seeds=sentinel, synchronized=True)
        if not reply or reply.get("status") != "ok":
            return False
        if not escapes_end_event(cand_ms, reply["ms"], ref_ms, ref_synced):
            return False
    ev.flags.append("unsynchronized_work")
    return True


def escapes_end_event(cand_events: list[float], cand_synced: list[float], ref_events: list[float],
                      ref_synced: float) -> bool:
    """The candidate's synchronized calls (median) exceed its event-timed ones by
    more than the reference's do, beyond HIDDEN_WORK_RATIO of its time."""
    events = metrics.median(cand_events)
    excess = (metrics.median(cand_synced) - events) - (ref_synced - metrics.median(ref_events))
    return excess > max((HIDDEN_WORK_RATIO - 1) * events, HIDDEN_WORK_MIN_MS)
