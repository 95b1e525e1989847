"""How long a worker was kept off the CPU by others (parent side): the part
of a timed block's wall window that is the machine's load, not the worker's
work, read from the kernel's scheduler accounting.

On a loaded host the scheduler can leave a worker's timing thread runnable
but waiting while another job runs on its core, for whole blocks at a time
(a CI host's other test worker). That wait lands in the trusted clock's
window (trusted_clock.py) and looks like hidden work. The kernel counts it
per thread (/proc/PID/task/TID/schedstat: time run, time waited on a run
queue), and counts every thread's and process's CPU time, none of which a
candidate can rewrite.

A block's excused wait is the timing thread's run-queue wait less the CPU
time the worker's own other threads and processes used meanwhile: a
candidate that keeps its timing thread waiting behind its own helper (which
does the hidden work) is excused nothing. Nothing is excused where that
time cannot be told: a process of the tree ended (or is a zombie) within
the block, or the kernel keeps no per-thread accounting; the window is
then judged as it is. The same samples give the CPU time of the worker's
other threads and processes (`others_ms`): unknown for a block in which a
process of the tree was reaped (its last work went with it, or to its
reaper in clock ticks); a zombie's final count stays in."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Iterable

_TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Sample:
    run_ns: int               # the timing thread's time on a CPU
    wait_ns: int              # ...and runnable but waiting for one
    tree_ns: dict[int, int]   # each process of the worker's tree: its CPU time
    zombies: frozenset[int] = frozenset()  # ...of which these have ended, unreaped


def _process_cpu_ns(pid: int) -> tuple[int, bool]:
    """The process's CPU time in ns, all its threads (ended ones too), with
    its reaped children's; and whether it is a zombie. A live process's own
    time is the kernel's CPUCLOCK_SCHED clock of it; a zombie's, its final
    count in clock ticks (it runs no more)."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rsplit(b")", 1)[1].split()
    children = (int(fields[13]) + int(fields[14])) * _TICK_NS  # cutime, cstime (fields 16, 17)
    if fields[0] == b"Z":
        return int((int(fields[11]) + int(fields[12])) * _TICK_NS + children), True  # utime, stime
    return time.clock_gettime_ns(((~pid) << 3) | 2) + int(children), False


def sample(timing_pid: int, members: Iterable[int]) -> Sample | None:
    """The scheduler's view of a worker whose timing runs on the main thread
    of TIMING_PID; MEMBERS: every process of its tree. None when the kernel
    keeps no per-thread accounting or the worker is gone."""
    try:
        with open(f"/proc/{timing_pid}/task/{timing_pid}/schedstat", "rb") as f:
            run, wait = (int(x) for x in f.read().split()[:2])
    except (OSError, ValueError):
        return None
    tree: dict[int, int] = {}
    zombies = set()
    for pid in members:
        try:
            tree[pid], ended = _process_cpu_ns(pid)
        except (OSError, ValueError, IndexError):
            continue  # ended between the listing and the read: missed by the next sample
        if ended:
            zombies.add(pid)
    return Sample(run, wait, tree, frozenset(zombies))


def others_ms(before: Sample | None, after: Sample | None) -> float | None:
    """The CPU time the worker's threads and processes other than its timing
    thread used between two samples; None where it cannot be told."""
    if before is None or after is None or not before.tree_ns.keys() <= after.tree_ns.keys():
        return None
    tree = sum(ns - before.tree_ns.get(pid, 0) for pid, ns in after.tree_ns.items())
    return (tree - (after.run_ns - before.run_ns)) / 1e6


def excused_ms(before: Sample | None, after: Sample | None) -> float:
    """The timing thread's wait between two samples that the worker's own
    other threads and processes do not explain."""
    others = others_ms(before, after)
    if others is None or before.zombies or after.zombies:  # a zombie's last moments are in ticks
        return 0.0
    return max(0.0, (after.wait_ns - before.wait_ns) / 1e6 - max(0.0, others))
