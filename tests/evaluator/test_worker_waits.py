"""The parent's side of the report channel (evaluator/sandbox.py, Worker): a
message past the per-message cap is a violation and never parsed, and a wait
on a worker that has exited ends within the drain grace even while a process
it left outside its group holds the report pipe open. Real pipes, real
processes; the worker itself is a stand-in (a shell that exits at once)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

from kernelsweep.evaluator import sandbox, settings


def _worker(tmp_path) -> sandbox.Worker:
    worker = sandbox.Worker("kernelsweep.none", {}, log_path=tmp_path / "w.log", cwd=tmp_path,
                            run_limit_s=600.0, build_limit_s=600.0)
    worker._t0 = time.monotonic()  # what start() sets: messages are stamped relative to it
    return worker


def _line(worker: sandbox.Worker, **fields) -> bytes:
    return (json.dumps({"nonce": worker._nonce, **fields}) + "\n").encode()


def test_a_message_past_the_cap_is_a_violation_and_the_next_one_is_read(tmp_path):
    worker = _worker(tmp_path)
    read_fd, write_fd = os.pipe()
    worker._spawn(worker._read_reports, read_fd)
    oversized = _line(worker, kind="phase", phase="trials", pad="x" * (settings.MESSAGE_CAP_BYTES + 1))
    with os.fdopen(write_fd, "wb") as pipe:
        pipe.write(oversized)
        pipe.write(_line(worker, kind="phase", phase="timing"))
    worker._threads[0].join(timeout=30)
    assert worker._violations == 1
    assert worker._phases == ["timing"]  # the oversized message was dropped, not believed


def test_a_wait_ends_after_the_worker_exits_though_an_escaped_process_holds_the_pipe(tmp_path):
    worker = _worker(tmp_path)
    read_fd, write_fd = os.pipe()
    # The stand-in worker exits at once; the sleeper it leaves in a new session keeps the
    # pipe's write end for a minute.
    worker._proc = subprocess.Popen(["sh", "-c", "setsid sleep 60 >/dev/null 2>&1 & echo $!"],
                                    pass_fds=[write_fd], start_new_session=True, stdout=subprocess.PIPE, text=True)
    os.close(write_fd)
    sleeper = int(worker._proc.stdout.read().strip())
    worker._threads.append(None)  # the log drain's place: reply() watches the report reader
    worker._spawn(worker._read_reports, read_fd)
    worker._proc.wait(timeout=30)
    worker._proc.stdout.close()
    started = time.monotonic()
    try:
        assert worker.reply(1) is None
        waited = time.monotonic() - started
        assert waited < settings.DRAIN_GRACE_S + 5, f"waited {waited:.1f} s on a pipe an escaped process holds"
        assert worker._threads[1].is_alive()  # the pipe really was still open
    finally:
        os.kill(sleeper, signal.SIGKILL)
