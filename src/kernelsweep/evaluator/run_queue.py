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
reaper in clock ticks); a zombie's final count stays in.

On the CPU target both workers time on one CPU, the one that was idlest
while they warmed up (`idlest_cpu`): two workers the scheduler left on
different cores, one of them shared with another job, gave the same honest
kernel 1.34x in one run and 0.63x in the next. Held to one core, each side's
blocks meet the same load in turn. The samples also say whether the timing
thread left that core during a block (`left_cpu`): its affinity changed, or
the kernel moved it (se.nr_migrations), which a thread held to one CPU only
does when the thread itself asks to run elsewhere."""

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
    cpu: int | None = None                 # the CPU the timing thread last ran on
    migrations: int | None = None          # ...its moves between CPUs so far (None: not kept)
    allowed: frozenset[int] | None = None  # ...the CPUs it may run on


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
        with open(f"/proc/{timing_pid}/task/{timing_pid}/stat", "rb") as f:
            cpu = int(f.read().rsplit(b")", 1)[1].split()[36])  # "processor" (field 39)
        allowed = frozenset(os.sched_getaffinity(timing_pid))
    except (OSError, ValueError, IndexError):
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
    return Sample(run, wait, tree, frozenset(zombies), cpu, _migrations(timing_pid), allowed)


def _migrations(pid: int) -> int | None:
    """The thread's se.nr_migrations (/proc/PID/task/PID/sched, kept by kernels built with scheduler debugging)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/sched", "rb") as f:
            for line in f:
                if line.startswith(b"se.nr_migrations"):
                    return int(line.split(b":")[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def cpu_idle_ticks() -> dict[int, int]:
    """Idle and iowait clock ticks so far of each CPU this process may use (/proc/stat)."""
    mine = os.sched_getaffinity(0)
    ticks = {}
    with open("/proc/stat", "rb") as f:
        for line in f:
            if line.startswith(b"cpu") and line[3:4].isdigit():
                fields = line.split()
                if int(fields[0][3:]) in mine:
                    ticks[int(fields[0][3:])] = int(fields[4]) + int(fields[5])
    return ticks


def idlest_cpu(before: dict[int, int], after: dict[int, int]) -> int | None:
    """The CPU idle the longest between two cpu_idle_ticks() readings. Ties
    (ticks are coarse) go by this process's pid, so that evaluations started
    side by side on an idle machine do not all take the same CPU."""
    gained = {cpu: after[cpu] - before.get(cpu, after[cpu]) for cpu in after}
    if not gained:
        return None
    order = sorted(gained)
    turn = os.getpid() % len(order)
    return max(order[turn:] + order[:turn], key=gained.__getitem__)  # max keeps the first of equals


def left_cpu(before: Sample | None, after: Sample | None, cpu: int) -> bool:
    """Whether the timing thread, held to CPU before the block, ran elsewhere
    within it: its affinity is another, or it moved more than the once it may
    be moved onto CPU at its first wakeup after being held there."""
    if before is None or after is None:
        return False
    if after.allowed is not None and after.allowed != {cpu}:
        return True
    if before.migrations is None or after.migrations is None:
        return False
    return after.migrations - before.migrations > (0 if before.cpu == cpu else 1)


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
