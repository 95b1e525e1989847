"""What the scheduler says about a worker (evaluator/run_queue.py), on real
processes sharing one core: the wait another job causes is excused; the wait
the worker's own helper causes (the helper doing the work the timing thread
hides) is not, nor is any wait once a process of the tree has ended."""

import os
import subprocess
import sys
import time

import pytest

from kernelsweep.evaluator import run_queue

CORE = min(os.sched_getaffinity(0))
# A busy main thread on CORE; with "helper", a busy child process beside it on the same core
# ("reaped": the child's end is reaped at once, so it leaves no zombie).
BUSY = """
import os, signal, sys, time
os.sched_setaffinity(0, {%d})
if sys.argv[1] == "reaped":
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
if sys.argv[1] in ("helper", "reaped") and os.fork() == 0:
    end = time.monotonic() + 30
    while time.monotonic() < end: pass
    os._exit(0)
print("ready", flush=True)
end = time.monotonic() + 30
while time.monotonic() < end: pass
""" % CORE


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def _tree(pid: int) -> list[int]:
    return [pid, *_children(pid)]


@pytest.fixture
def start():
    procs = []

    def run(*argv: str) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", *argv], stdout=subprocess.PIPE, text=True)
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        for pid in _tree(proc.pid) if proc.poll() is None else []:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        proc.wait()


def _measure(worker: subprocess.Popen, seconds: float = 0.6) -> tuple[float, float, float]:
    """(excused, waited, others) in ms over SECONDS of the worker's life:
    others is the CPU time of its tree beyond its timing thread's."""
    assert worker.stdout.readline().strip() == "ready"
    time.sleep(0.1)  # its helper (if any) is running by now
    before = run_queue.sample(worker.pid, _tree(worker.pid))
    time.sleep(seconds)
    after = run_queue.sample(worker.pid, _tree(worker.pid))
    assert before is not None and after is not None, "the kernel keeps no per-thread accounting here"
    others = sum(after.tree_ns.values()) - sum(before.tree_ns.values()) - (after.run_ns - before.run_ns)
    return run_queue.excused_ms(before, after), (after.wait_ns - before.wait_ns) / 1e6, others / 1e6


def test_the_wait_another_job_causes_is_excused(start):
    hog = start(BUSY, "alone")
    assert hog.stdout.readline().strip() == "ready"
    excused, waited, others = _measure(start(BUSY, "alone"))
    assert waited > 150 and others < 20 and excused > 0.8 * waited, (excused, waited, others)


def test_the_wait_its_own_helper_causes_is_not(start):
    """The helper's CPU time (a child process) is seen, and that much of the
    timing thread's wait is not excused; the rest (the CI host's other jobs on
    that core, if any) is."""
    excused, waited, others = _measure(start(BUSY, "helper"))
    assert waited > 100 and others > 100, (waited, others)
    assert abs(excused - max(0.0, waited - others)) < 1.0, (excused, waited, others)


def test_the_excuse_is_the_wait_less_the_tree_s_other_work():
    before = run_queue.Sample(run_ns=0, wait_ns=0, tree_ns={1: 0, 2: 0})
    waited_behind_helper = run_queue.Sample(run_ns=100_000_000, wait_ns=100_000_000,
                                            tree_ns={1: 100_000_000, 2: 100_000_000})
    assert run_queue.excused_ms(before, waited_behind_helper) == 0.0
    waited_behind_others = run_queue.Sample(run_ns=100_000_000, wait_ns=100_000_000,
                                            tree_ns={1: 100_000_000, 2: 0})
    assert run_queue.excused_ms(before, waited_behind_others) == 100.0
    assert run_queue.excused_ms(before, None) == 0.0


@pytest.mark.parametrize("end", ["helper", "reaped"])
def test_nothing_is_excused_once_a_process_of_the_tree_has_ended(start, end):
    """A zombie, or a process gone from the tree: what it did in the block is not
    known to the tick, so no wait is excused."""
    worker = start(BUSY, end)
    assert worker.stdout.readline().strip() == "ready"
    time.sleep(0.1)
    before = run_queue.sample(worker.pid, _tree(worker.pid))
    for pid in _children(worker.pid):
        os.kill(pid, 9)
    time.sleep(0.3)
    after = run_queue.sample(worker.pid, _tree(worker.pid))
    assert before is not None and after is not None and len(before.tree_ns) == 2
    assert run_queue.excused_ms(before, after) == 0.0
    if end == "helper":  # the zombie's work is still counted: its helper cannot hide the rest by ending
        assert after.zombies and run_queue.others_ms(before, after) is not None
    else:
        assert len(after.tree_ns) == 1 and run_queue.others_ms(before, after) is None


# Wakes every 5 ms on the CPU it is held to; with "hop", it moves to another CPU and back each time.
WAKER = """
import os, sys, time
print("ready", flush=True)
end = time.monotonic() + 30
while time.monotonic() < end:
    time.sleep(0.005)
    if sys.argv[1] == "hop":
        held = os.sched_getaffinity(0)
        os.sched_setaffinity(0, set(range(os.cpu_count())) - held)
        os.sched_setaffinity(0, held)
"""


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
@pytest.mark.parametrize("way", ["stay", "hop"])
def test_a_thread_held_to_one_cpu_is_seen_leaving_it(way):
    """Held to one CPU, a thread that wakes a few hundred times has not left it;
    one that moves elsewhere and back each time has, with its affinity as it was."""
    cpu = max(os.sched_getaffinity(0))
    proc = subprocess.Popen([sys.executable, "-c", WAKER, way], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        os.sched_setaffinity(proc.pid, {cpu})
        before = run_queue.sample(proc.pid, [proc.pid])
        time.sleep(0.5)
        after = run_queue.sample(proc.pid, [proc.pid])
        assert after.allowed == {cpu}
        if before.migrations is None:
            pytest.skip("this kernel keeps no se.nr_migrations")
        assert run_queue.left_cpu(before, after, cpu) == (way == "hop"), (before, after)
    finally:
        proc.kill()
        proc.wait()


def test_a_thread_whose_affinity_changed_has_left_its_cpu():
    proc = subprocess.Popen([sys.executable, "-c", WAKER, "stay"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        cpus = os.sched_getaffinity(0)
        os.sched_setaffinity(proc.pid, {min(cpus)})
        before = run_queue.sample(proc.pid, [proc.pid])
        os.sched_setaffinity(proc.pid, cpus)
        after = run_queue.sample(proc.pid, [proc.pid])
        assert run_queue.left_cpu(before, after, min(cpus)) == (len(cpus) > 1)
    finally:
        proc.kill()
        proc.wait()
