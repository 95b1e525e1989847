"""Run one worker child in isolation and talk to it.

Each worker is a module of kernelsweep.evaluator.untrusted run in isolated
mode, in a fresh process in its own session, confined when the caller asks
(confine.py: its own namespaces, the worker is PID 1 of its own PID
namespace, and killing it kills everything it started). Its stdout/stderr
are drained into a size-capped log, its configuration goes in on stdin,
commands down a control pipe and reports up a private pipe, each line
stamped with a per-run nonce. A watchdog thread kills it at the hard limits:
one for building extensions (time inside load_inline) and one for
everything else, not counting time it spends idle waiting for a command."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import signal

from kernelsweep.runtime import process_group, taskcode
from kernelsweep.evaluator import confine, messages, run_queue, settings
from kernelsweep.runtime.process_group import kill_group



def child_env(overrides: dict[str, str | None] | None = None) -> dict[str, str]:
    """The parent's environment, with this package importable and unbuffered
    output; a None override removes a variable."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if taskcode.PACKAGE_ROOT not in paths:
        paths.insert(0, taskcode.PACKAGE_ROOT)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["PYTHONUNBUFFERED"] = "1"
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


class CappedLog:
    """Keeps the first and the last `cap/2` bytes of a stream in a file."""

    def __init__(self, path: Path, cap: int = settings.LOG_CAP_BYTES):
        self.path = path
        self._half = max(1024, cap // 2)
        self._file = open(path, "wb")
        self._head = 0
        self._tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self._half - self._head
        if room > 0:
            part = data[:room]
            self._file.write(part)
            self._head += len(part)
            data = data[room:]
        if data:
            self._tail += data
            if len(self._tail) > 2 * self._half:
                del self._tail[: len(self._tail) - self._half]

    def close(self) -> None:
        tail = bytes(self._tail[-self._half:])
        omitted = self.total - self._head - len(tail)
        if omitted > 0:
            self._file.write(f"\n[kernelsweep: {omitted} bytes of output omitted]\n".encode())
        self._file.write(tail)
        self._file.close()


def read_excerpt(path: Path, limit: int = settings.LOG_EXCERPT_BYTES) -> str:
    """The last `limit` bytes of a log, decoded leniently."""
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - limit))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


@dataclass
class Outcome:
    label: str
    returncode: int | None
    signal: int | None            # the signal that ended the child, if any
    timed_out: bool
    timeout_phase: str | None     # "compile" or "run"
    killed_by_harness: bool
    result: dict | None           # the worker's final report
    events: list[dict]
    violations: int               # report lines without the right nonce
    log: str
    log_excerpt: str
    log_bytes: int
    wall_s: float
    build_s: float
    interrupted_build: str | None  # build directory of a build cut short
    phases: list[str] = field(default_factory=list)
    strays_killed: int = 0        # processes it left outside its group, killed after it
    results: int = 0              # result messages received (one is legitimate)
    confinement_failed: bool = False  # the launcher could not set up the namespaces

    @property
    def last_phase(self) -> str | None:
        return self.phases[-1] if self.phases else None


# Workers started and not yet waited for, and the children this process had
# before it adopted orphans: kill_adopted spares both.
_LIVE: set[int] = set()
_SPARED: set[int] | None = None


def _adopt_orphans() -> None:
    global _SPARED
    if _SPARED is None:
        _SPARED = set(process_group.child_pids())
        process_group.adopt_orphans()


class Worker:
    def __init__(self, module: str, config: dict[str, Any], *, log_path: Path, cwd: Path,
                 run_limit_s: float, build_limit_s: float, env: dict[str, str] | None = None,
                 label: str | None = None, confinement: dict[str, Any] | None = None,
                 pass_fds: tuple[int, ...] = (), replies: dict[str, messages.Shape] | None = None):
        self.module = module
        self.label = label or module.rsplit(".", 1)[-1]
        self.config = dict(config)
        self.log_path = Path(log_path)
        self.cwd = Path(cwd)
        self.run_limit_s = float(run_limit_s)
        self.build_limit_s = float(build_limit_s)
        self.env = env if env is not None else child_env()
        self.confinement = confinement  # launcher spec (binds, hide, limits), or None: a plain child
        self.extra_fds = tuple(pass_fds)  # inherited as they are (numbers named in the config)
        self._nonce = secrets.token_hex(16)
        self._lock = threading.Lock()
        self._events: list[dict] = []
        self._phases: list[str] = []
        self._violations = 0
        self._result: dict | None = None
        self._build_open: tuple[float, str] | None = None
        self._build_total = 0.0
        self._idle_since: float | None = None
        self._idle_total = 0.0
        self._replies: dict[int, dict | None] = {}  # None: a reply that broke the protocol
        # The declared replies by command (messages.CANDIDATE_REPLIES), checked as they
        # arrive; None: not checked. _commands: the command of each sequence number sent.
        self._reply_shapes = replies
        self._commands: dict[int, str] = {0: "setup"}
        self._results = 0
        self._hello = False
        self.prepared: str | None = None  # what its hello said of its host-side preparation (frame._Warm)
        self._seq = 0
        self._changed = threading.Condition(self._lock)
        self._inner_pid: int | None = None
        self._outcome: Outcome | None = None
        self._timeout_phase: str | None = None
        self._killed = False
        self._exited_at: float | None = None  # when a wait first saw the process gone
        self._proc: subprocess.Popen | None = None
        self._control_w: int | None = None
        self._threads: list[threading.Thread] = []
        self._done = threading.Event()

    # ---- start -------------------------------------------------------------
    def start(self) -> "Worker":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.cwd.mkdir(parents=True, exist_ok=True)
        report_r, report_w = os.pipe()
        out_r, out_w = os.pipe()
        control_r, self._control_w = os.pipe()
        pass_fds = [report_w, control_r, *self.extra_fds]
        config = dict(self.config, nonce=self._nonce, report_fd=report_w, control_fd=control_r)
        argv = taskcode.child_argv(self.module)
        pid_r = None
        if self.confinement is not None:
            pid_r, pid_w = os.pipe()
            pass_fds.append(pid_w)
            spec = dict(self.confinement, pid_fd=pid_w, cwd=str(self.cwd))
            argv = confine.launcher_argv(spec, argv)
        self._t0 = time.monotonic()
        _adopt_orphans()
        try:
            self._proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=out_w, stderr=out_w, cwd=self.cwd,
                                          env=self.env, pass_fds=pass_fds, start_new_session=True)
        finally:
            for fd in (out_w, report_w, control_r) + ((pid_w,) if pid_r is not None else ()):
                os.close(fd)
        _LIVE.add(self._proc.pid)
        if pid_r is not None:
            self._read_inner_pid(pid_r)
        self._log = CappedLog(self.log_path)
        self._spawn(self._drain, out_r)
        self._spawn(self._read_reports, report_r)
        try:
            self._proc.stdin.write(json.dumps(config).encode("utf-8"))
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass  # the child died at once; its exit status tells the story
        self._watchdog = threading.Thread(target=self._watch, name=f"{self.label}-watchdog", daemon=True)
        self._watchdog.start()
        return self

    def _read_inner_pid(self, fd: int) -> None:
        """The confined worker's PID (as this namespace sees it), from the launcher."""
        data = b""
        try:
            while True:
                chunk = os.read(fd, 4096)
                if not chunk:
                    break
                data += chunk
        finally:
            os.close(fd)
        try:
            self._inner_pid = int(json.loads(data.decode()).get("pid"))
        except (ValueError, TypeError, AttributeError):
            self._inner_pid = None

    def _spawn(self, target, fd: int) -> None:
        t = threading.Thread(target=target, args=(fd,), name=f"{self.label}-{target.__name__}", daemon=True)
        t.start()
        self._threads.append(t)

    # ---- reader threads ----------------------------------------------------
    def _drain(self, fd: int) -> None:
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                self._log.write(chunk)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _read_reports(self, fd: int) -> None:
        buf = b""
        received = 0
        overlong = False  # inside a line already longer than MESSAGE_CAP_BYTES: dropped to its end
        try:
            while True:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    break
                received += len(chunk)
                if received > settings.REPORT_CAP_BYTES:
                    self._violation()
                    continue  # keep draining so the child never blocks on us
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if overlong:
                        overlong = False  # the end of the line already counted
                    else:
                        self._handle(line)
                if len(buf) > settings.MESSAGE_CAP_BYTES:
                    if not overlong:
                        self._violation()
                    overlong, buf = True, b""
        except OSError:
            pass
        finally:
            os.close(fd)
        if buf.strip() and not overlong:
            self._handle(buf)

    def _violation(self) -> None:
        with self._lock:
            self._violations += 1

    def _handle(self, line: bytes) -> None:
        now = time.monotonic()
        if len(line) > settings.MESSAGE_CAP_BYTES:
            self._violation()
            return
        msg = messages.parse(line, self._nonce)
        with self._lock:
            if msg is None:
                self._violations += 1
                return
            kind = msg.get("kind")
            msg["received"] = now - self._t0
            self._events.append(msg)
            if kind == "phase":
                self._phases.append(str(msg.get("phase")))
                self._changed.notify_all()
            elif kind == "hello":
                if self._hello:  # a worker says it once: another was not its frame's
                    self._violations += 1
                    return
                self._hello = True
                self.prepared = str(msg.get("prepared"))
                if self._idle_since is None:  # waiting for "go" is not run time
                    self._idle_since = now
                self._changed.notify_all()
            elif kind == "reply":
                if self._results:  # a worker answers by replies or by one result, never both
                    self._violations += 1
                seq, payload = msg["seq"], msg["payload"]
                if self._reply_shapes is not None and messages.reply_violation(
                        self._reply_shapes, self._commands.get(seq), payload) is not None:
                    self._violations += 1
                    payload = None  # read as no reply: the parent ends the worker
                self._replies[seq] = payload
                if self._idle_since is None:
                    self._idle_since = now
                self._changed.notify_all()
            elif kind == "build_start":
                self._build_open = (now, str(msg.get("directory", "")))
            elif kind == "build_end" and self._build_open is not None:
                self._build_total += now - self._build_open[0]
                self._build_open = None
            elif kind == "result":
                self._results += 1
                if self._replies:  # a serving worker (frame.serve) never sends a result
                    self._violations += 1
                elif self._result is None:
                    self._result = msg.get("payload")

    # ---- control -----------------------------------------------------------
    def _ended(self) -> bool:
        """The process has exited and every report it sent has been read, or
        it exited DRAIN_GRACE_S ago: a process it started outside its group
        may hold the report pipe open, and nothing it sends is awaited."""
        if self._proc.poll() is None:
            return False
        if self._exited_at is None:
            self._exited_at = time.monotonic()
        return (not any(t.is_alive() for t in self._threads[1:])
                or time.monotonic() - self._exited_at > settings.DRAIN_GRACE_S)

    def _await(self, ready, timeout: float | None) -> bool:
        """Wait until ready() (checked under the lock); False when the worker
        ended first or the deadline passed. Every wait has one: TIMEOUT, or
        the worker's own limits plus WAIT_GRACE_S (the watchdog has killed it
        by then; this also ends a wait on a pipe that something it started
        still holds open)."""
        if timeout is None:
            timeout = self.run_limit_s + self.build_limit_s + settings.WAIT_GRACE_S
        deadline = time.monotonic() + timeout
        with self._changed:
            while not ready():
                left = deadline - time.monotonic()
                if self._ended() or left <= 0:
                    return False
                self._changed.wait(min(0.05, left))
            return True

    def hello(self) -> bool:
        """Wait for a worker started with await_go to say it is warm; False
        when it ended first (its failure shows at reply(0))."""
        return self._await(lambda: self._hello, None)

    def reached(self, phase: str) -> bool:
        """Wait until the worker reports PHASE; False when it ended first."""
        return self._await(lambda: phase in self._phases, None)

    def reply(self, seq: int, timeout: float | None = None) -> dict | None:
        """The worker's reply to command `seq` (0: its setup); None when the
        worker ended (or the wait timed out) without one, or when its reply
        broke the protocol (messages.py; counted as a violation)."""
        if not self._await(lambda: seq in self._replies, timeout):
            return None
        with self._lock:
            return self._replies[seq]

    def send(self, op: str, **args: Any) -> int:
        """Send a command; returns its sequence number (see reply)."""
        with self._lock:
            self._seq += 1
            seq = self._seq
            self._commands[seq] = op
            if self._idle_since is not None:
                self._idle_total += time.monotonic() - self._idle_since
                self._idle_since = None
        try:
            if self._control_w is None:
                raise OSError("the control pipe is closed")
            os.write(self._control_w, (json.dumps({"seq": seq, "op": op, **args}) + "\n").encode("utf-8"))
        except OSError:
            pass  # it ended; reply() says so
        return seq

    def request(self, op: str, **args: Any) -> dict | None:
        return self.reply(self.send(op, **args))

    @property
    def _worker_pid(self) -> int:
        """The worker process itself (inside its namespaces, PID 1 there), as seen here."""
        return self._inner_pid or self._proc.pid

    def _members(self) -> list[int]:
        """The worker and every process below it (namespace PIDs as seen here)."""
        roots = [self._worker_pid]
        found: list[int] = []
        while roots:
            pid = roots.pop()
            found.append(pid)
            try:
                for task in os.listdir(f"/proc/{pid}/task"):
                    with open(f"/proc/{pid}/task/{task}/children") as f:
                        roots.extend(int(c) for c in f.read().split())
            except OSError:
                continue
        return found

    def scheduler_sample(self) -> run_queue.Sample | None:
        """The kernel's accounting of the worker's timing thread (its main
        thread) and its tree, for the trusted clock (run_queue.py)."""
        return run_queue.sample(self._worker_pid, self._members())

    def pin(self, cpu: int) -> bool:
        """Hold every thread of the worker and its tree to CPU (the CPU target's
        timing, run_queue.py); whether the worker's timing thread took it."""
        for pid in self._members():
            try:
                tasks = os.listdir(f"/proc/{pid}/task")
            except OSError:
                continue
            for task in tasks:
                try:
                    os.sched_setaffinity(int(task), {cpu})
                except OSError:
                    pass  # ended meanwhile, or CPU outside its cpuset: the timing thread's answer decides
        try:
            return os.sched_getaffinity(self._worker_pid) == {cpu}
        except OSError:
            return False

    def _signal_members(self, sig: int) -> None:
        for pid in self._members():
            try:
                os.kill(pid, sig)
            except OSError:
                pass

    def freeze(self) -> None:
        """Stop the worker and everything it started (while the reference is timed)."""
        self._signal_members(signal.SIGSTOP)

    def thaw(self) -> None:
        self._signal_members(signal.SIGCONT)

    def abort(self) -> None:
        """Stop the child now (the parent no longer needs it)."""
        self._kill(None)

    def finish(self) -> None:
        """Tell a serving worker to leave."""
        self.send("finish")

    def _kill(self, phase: str | None) -> None:
        with self._lock:
            if self._killed or self._proc.poll() is not None:
                return  # already ended on its own: its exit status stands
            if self._inner_pid:
                try:  # PID 1 of its namespace: the kernel kills everything inside with it
                    os.kill(self._inner_pid, signal.SIGKILL)
                except OSError:
                    pass
            if not kill_group(self._proc.pid):
                return
            self._killed = True
            if phase is not None:
                self._timeout_phase = phase

    def _watch(self) -> None:
        proc = self._proc
        while proc.poll() is None:
            now = time.monotonic()
            with self._lock:
                build = self._build_total + (now - self._build_open[0] if self._build_open else 0.0)
                waiting = self._idle_total + (now - self._idle_since if self._idle_since else 0.0)
            run = (now - self._t0) - build - waiting
            if build > self.build_limit_s:
                self._kill("compile")
            elif run > self.run_limit_s:
                self._kill("run")
            self._done.wait(0.05)
        self._end = time.monotonic()

    # ---- finish ------------------------------------------------------------
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait(self) -> Outcome:
        """Wait for the worker to end (killing what it left) and read its
        outcome; later calls return the same outcome."""
        if self._outcome is None:
            self._outcome = self._collect()
        return self._outcome

    def _collect(self) -> Outcome:
        self._watchdog.join()
        if self._inner_pid:
            try:
                os.kill(self._inner_pid, signal.SIGKILL)
            except OSError:
                pass
        # Whatever the child left behind in its group goes too (grandchildren
        # holding our pipes open would otherwise keep the readers waiting).
        kill_group(self._proc.pid)
        _LIVE.discard(self._proc.pid)
        # ...and whatever left the group first (setsid, setpgid): adopted, so killed here.
        strays = process_group.kill_adopted(spared=_LIVE | (_SPARED or set()) | {self._inner_pid})
        for t in self._threads:
            t.join(timeout=5.0)
        if self._control_w is not None:
            try:
                os.close(self._control_w)
            except OSError:
                pass
            self._control_w = None
        self._log.close()
        rc = self._proc.returncode
        with self._lock:
            interrupted = self._build_open[1] if self._build_open else None
            build_s = self._build_total
            if self._build_open:
                build_s += self._end - self._build_open[0]
            return Outcome(
                label=self.label,
                returncode=rc,
                signal=-rc if rc is not None and rc < 0 else None,
                timed_out=self._timeout_phase is not None,
                timeout_phase=self._timeout_phase,
                killed_by_harness=self._killed,
                result=self._result,
                events=list(self._events),
                violations=self._violations,
                log=str(self.log_path),
                log_excerpt=read_excerpt(self.log_path),
                log_bytes=self._log.total,
                wall_s=self._end - self._t0,
                build_s=build_s,
                interrupted_build=interrupted,
                phases=list(self._phases),
                strays_killed=len(strays),
                results=self._results,
                confinement_failed=self.confinement is not None and rc == confine.CONFINEMENT_FAILED,
            )


def run_worker(module: str, config: dict[str, Any], **kwargs: Any) -> Outcome:
    """Start a worker and wait for it (no go handshake)."""
    return Worker(module, config, **kwargs).start().wait()


def remove_stale_lock(build_directory: str | None) -> None:
    """torch's FileBaton leaves `lock` behind when its holder is killed, and the
    next build of that extension would wait on it forever. Called only for a
    build whose (killed) child held it."""
    if build_directory:
        try:
            os.unlink(os.path.join(build_directory, "lock"))
        except OSError:
            pass
