"""One way to run children: in their own group, killed whole at a limit."""

import os
import signal
import subprocess
import sys
import time

from kernelsweep.runtime.process_group import describe_exit, run_in_group, stop_group

# A child that starts a grandchild sleeping for a minute, writes the grandchild's
# pid, then does what the test asks.
SPAWNER = """
import subprocess, sys, time
g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[1], "w").write(str(g.pid))
{tail}
"""


def _alive(pid: int) -> bool:
    for _ in range(100):  # the kernel reaps the killed grandchild (it is init's now) shortly after
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        with open(f"/proc/{pid}/stat") as f:
            if f.read().split()[2] == "Z":
                return False
        time.sleep(0.05)
    return True


def test_timeout_kills_the_child_and_what_it_spawned(tmp_path):
    pid_file = tmp_path / "pid"
    code = SPAWNER.format(tail="time.sleep(60)")
    done = run_in_group([sys.executable, "-c", code, str(pid_file)], timeout_s=3)
    assert done.timed_out and done.returncode is None and 2.5 < done.wall_s < 20
    assert not _alive(int(pid_file.read_text()))


def test_a_normal_exit_leaves_no_grandchild_behind(tmp_path):
    pid_file = tmp_path / "pid"
    log = tmp_path / "log"
    with open(log, "wb") as out:
        done = run_in_group([sys.executable, "-c", SPAWNER.format(tail="print('bye'); sys.exit(3)"),
                             str(pid_file)], timeout_s=60, stdout=out)
    assert not done.timed_out and done.returncode == 3 and done.wall_s < 30
    assert log.read_text().strip() == "bye"
    assert not _alive(int(pid_file.read_text()))


def test_stop_group_escalates_when_sigterm_is_ignored(tmp_path):
    ready = tmp_path / "ready"
    code = f"import signal, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); " \
           f"pathlib.Path({str(ready)!r}).touch(); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    while not ready.exists():
        time.sleep(0.05)
    start = time.monotonic()
    stop_group(proc, grace_s=1.0)
    assert proc.returncode == -signal.SIGKILL and time.monotonic() - start < 10


def test_exit_descriptions():
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-signal.SIGSEGV) == "was killed by SIGSEGV"
    assert "out of memory" in describe_exit(-signal.SIGKILL)


def test_orphans_that_left_the_group_are_adopted_and_killed(tmp_path):
    from kernelsweep.runtime.process_group import adopt_orphans, child_pids, kill_adopted

    assert adopt_orphans()
    spared = set(child_pids())
    pid_file = tmp_path / "pid"
    # A child that double-forks a sleeper into a new session, then exits: a group kill
    # would miss the sleeper, which is now ours (the subreaper's).
    code = ("import os, subprocess, sys\n"
            "p = subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
            "open(sys.argv[1], 'w').write(str(p.pid))\n")
    done = run_in_group([sys.executable, "-c", code, str(pid_file)], timeout_s=60)
    assert done.returncode == 0
    sleeper = int(pid_file.read_text())
    assert sleeper in child_pids()
    # A child of ours in our own session (a quick tool call) is never touched.
    neighbour = subprocess.Popen(["sleep", "60"])
    try:
        assert kill_adopted(spared) == [sleeper]
        assert sleeper not in child_pids() and not _alive(sleeper)
        assert neighbour.poll() is None
    finally:
        neighbour.kill()
        neighbour.wait()
