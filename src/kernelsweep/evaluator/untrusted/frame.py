"""The frame every worker runs in, and its private link to the parent.

The parent writes the configuration (with a per-run nonce and the numbers of
two inherited pipes) to stdin; the worker reads it before any candidate code
exists and points stdin at /dev/null. Reports go up the report pipe, one JSON
line each, stamped with the nonce; commands come down the control pipe, one
JSON line each. A one-shot worker (`run`) sends exactly one result; a serving
worker (`serve`) answers each command with one reply and ends on "finish".
Primitives are captured at import, so a candidate replacing json.dumps or
os.write later changes nothing here. Either way the worker leaves with
os._exit: no atexit handlers, nothing a candidate registered."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from contextlib import contextmanager
from typing import Any, Callable, Iterator

_dumps = json.dumps
_loads = json.loads
_write = os.write
_read = os.read
_exit = os._exit
_monotonic = time.monotonic


class InterfaceProblem(Exception):
    """ModelNew is missing or does not fit the reference's calling convention."""


def finish(code: int = 0) -> None:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # noqa: BLE001 - leaving is what matters
        pass
    _exit(code)


def read_config() -> dict[str, Any]:
    raw = sys.stdin.buffer.read()
    config = _loads(raw.decode("utf-8"))
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    return config


class Channel:
    def __init__(self, config: dict[str, Any]):
        self._fd = int(config.pop("report_fd"))
        self._nonce = str(config.pop("nonce"))
        control = config.pop("control_fd", None)
        self._control = int(control) if control is not None else None
        self._buf = b""
        self._sending = threading.Lock()  # "hello" may go up from another thread (_Warm)

    def send(self, kind: str, **payload: Any) -> None:
        data = (_dumps({"nonce": self._nonce, "kind": kind, **payload}, default=str) + "\n").encode("utf-8")
        with self._sending:
            while data:
                data = data[_write(self._fd, data):]

    def phase(self, name: str) -> None:
        self.send("phase", phase=name, t=_monotonic())

    def next_command(self) -> dict[str, Any] | None:
        """The parent's next command; None when it closed the pipe."""
        while b"\n" not in self._buf:
            chunk = _read(self._control, 1 << 16)
            if not chunk:
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        return _loads(line.decode("utf-8"))


class WorkerContext:
    def __init__(self) -> None:
        self.config: dict[str, Any] = read_config()
        self.channel = Channel(self.config)
        self.phase_name = "start"
        self.candidate_file: str | None = None
        self.candidate_names: frozenset[str] = frozenset(self.config.get("candidate_names", []))
        self.hooks = None  # BuildHooks, once installed
        self.host_threads: int | None = None  # torch's thread count outside the host-side preparation

    def phase(self, name: str) -> None:
        self.phase_name = name
        self.channel.phase(name)

    def describe(self, exc: BaseException) -> dict[str, Any]:
        from kernelsweep.evaluator.untrusted.failures import describe_exception

        return describe_exception(
            exc, self.phase_name, candidate_file=self.candidate_file, candidate_names=self.candidate_names,
            build_failures=self.hooks.failures if self.hooks else None,
            extension_modules=self.hooks.module_names if self.hooks else frozenset())

    def extras(self) -> dict[str, Any]:
        """What is worth reporting even when the body failed."""
        if self.hooks is None:
            return {}
        return {"builds": self.hooks.summary(), "compile_s": self.hooks.compile_s}

    def failure_message(self, exc: BaseException) -> dict[str, Any]:
        if isinstance(exc, InterfaceProblem):
            return {"status": "interface_error", "message": str(exc), "phase": self.phase_name, **self.extras()}
        try:
            traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - stderr may be closed
            pass
        try:
            return {"status": "error", "error": self.describe(exc), **self.extras()}
        except BaseException as inner:  # noqa: BLE001
            return {"status": "error", "error": {"type": type(exc).__name__, "message": str(exc)[-2000:],
                                                 "phase": self.phase_name, "describe_failed": repr(inner)}}


def _start() -> WorkerContext | None:
    try:
        ctx = WorkerContext()
    except Exception:  # noqa: BLE001 - no configuration: nothing can be reported
        finish(2)
        return None
    from kernelsweep.evaluator.untrusted.machine import set_limits

    set_limits(ctx.config.get("device", "cpu"), ctx.config.get("memory_limit"))
    return ctx


class _Warm:
    """Under `await_go`: says "hello" once the host-side preparation has ended
    (`prepared` or `failed`) or waits at the device gate (`waiting`), then
    waits for the parent's decision: "go" (the device is the worker's: set it
    up with `take_device`, before any waiting code's CUDA runs, then open the
    gate) or "report" (the parent judges a failed preparation without the
    device: the gate stays shut). Leaves quietly when the parent ends instead.
    A thread of its own, so that code waiting at the gate (on the main
    thread) does not keep the parent from handing over the device."""

    def __init__(self, ctx: WorkerContext, gate: Any, take_device: Callable[[WorkerContext], Any] | None):
        self._ctx, self._gate, self._take_device = ctx, gate, take_device
        self._status: str | None = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self.decided = threading.Event()
        self.given = False  # the device, by "go"
        gate.on_wait = lambda: self.ready("waiting")
        threading.Thread(target=self._hello_then_decision, name="kernelsweep-go", daemon=True).start()

    def ready(self, status: str) -> None:
        with self._lock:
            if self._status is None:
                self._status = status
                self._ready.set()

    def _hello_then_decision(self) -> None:
        self._ready.wait()
        ctx = self._ctx
        ctx.channel.send("hello", prepared=self._status)
        command = ctx.channel.next_command()
        op = (command or {}).get("op")
        if op == "go":
            if self._take_device is not None:
                self._gate.let_harness_through()
                try:
                    self._take_device(ctx)
                except BaseException as exc:  # noqa: BLE001 - the device's fault, reported as such
                    ctx.phase_name = "device"
                    ctx.channel.send("reply", seq=0, payload=ctx.failure_message(exc))
                    finish(0)
            self.given = True
            self._gate.open()
        elif op != "report":
            finish(0)
        self.decided.set()


class NotGiven(Exception):
    """Told to report a failed preparation it did not have (its hello was not its own)."""


def _prepared_before_go(ctx: WorkerContext, prepare: Callable[[WorkerContext], Any] | None,
                        take_device: Callable[[WorkerContext], Any] | None = None) -> Any:
    """Without `await_go`: take_device(ctx), then prepare(ctx). With it: prepare
    on a few threads (the job before may still time beside it) behind the
    device gate (untrusted/devicegate.py: what starts CUDA waits for "go"); say
    "hello" once it has ended or waits for the device, so the parent takes the
    device only then (a model built on the host, however long it takes,
    never holds it); after "go" (the device set up first by take_device) return the
    state or raise what prepare raised, so a failure is reported once the
    device is ours; after "report" raise it without the device."""
    if not ctx.config.get("await_go"):
        if take_device is not None:
            ctx.phase("device")
            take_device(ctx)
        return prepare(ctx) if prepare is not None else None
    from kernelsweep.evaluator.untrusted.devicegate import DeviceGate

    gate = DeviceGate().install()
    warm = _Warm(ctx, gate, take_device)
    prepared: Any = None
    early_failure: BaseException | None = None
    try:
        if prepare is not None:
            with _few_threads(ctx):
                prepared = prepare(ctx)
        warm.ready("prepared")
    except BaseException as exc:  # noqa: BLE001 - reported after the parent's decision
        early_failure = exc
        warm.ready("failed")
    warm.decided.wait()
    if early_failure is not None:
        raise early_failure
    if not warm.given:
        raise NotGiven("told to report a failed preparation, but the preparation succeeded")
    return prepared


def run(body: Callable[..., dict[str, Any]], prepare: Callable[[WorkerContext], Any] | None = None) -> None:
    """A one-shot worker: run the body, send one result, leave. With `prepare`
    given, its state is passed on as `body(ctx, state)`; under `await_go` it
    runs (on a few threads) before the device is the worker's, as in serve()."""
    ctx = _start()
    try:
        prepared = _prepared_before_go(ctx, prepare)
        message = {"status": "ok", **(body(ctx) if prepare is None else body(ctx, prepared))}
    except BaseException as exc:  # noqa: BLE001 - everything a candidate raises is data
        message = ctx.failure_message(exc)
    try:
        ctx.channel.send("result", payload=message)
    except BaseException:  # noqa: BLE001 - the report pipe is gone
        finish(3)
    finish(0)


@contextmanager
def _few_threads(ctx: WorkerContext) -> Iterator[None]:
    """Host work beside another job's timing takes at most a quarter of the
    cores. `ctx.host_threads` keeps the count the work would otherwise see
    (what a candidate's settings are compared with); a count the work set
    itself stays."""
    import torch

    ctx.host_threads = before = torch.get_num_threads()
    few = max(1, min(before, (os.cpu_count() or 4) // 4))
    torch.set_num_threads(few)
    try:
        yield
    finally:
        if torch.get_num_threads() == few:
            torch.set_num_threads(before)


def serve(setup: Callable[..., Any], commands: dict[str, Callable[..., dict[str, Any]]],
          prepare: Callable[[WorkerContext], Any] | None = None,
          take_device: Callable[[WorkerContext], Any] | None = None) -> None:
    """A serving worker: `setup(ctx)` returns the state the commands share and
    is answered as reply 0; then each command {"seq", "op", **args} is answered
    by one reply {"seq", "status", ...}. A failure ends the worker after its reply.
    With `await_go` in the config the worker first says "hello" and waits for
    "go": the parent sends it once it holds the device (gpu_slots.timing_slot).
    `prepare(ctx)`, where given, is the host-side part of the setup: it runs
    before "hello", on a few threads (the job before may be timing beside it),
    behind the device gate, and its state is passed on as `setup(ctx, state)`;
    its failure is answered as reply 0, after "go" or "report".
    `take_device(ctx)`, where given, sets the device up: before prepare
    without `await_go`, at "go" with it, before any code waiting at the gate
    goes on; its failure is phase "device"."""
    ctx = _start()
    seq = 0
    try:
        prepared = _prepared_before_go(ctx, prepare, take_device)
        state = setup(ctx) if prepare is None else setup(ctx, prepared)
        ctx.channel.send("reply", seq=0, payload={"status": "ok", **(getattr(state, "ready", None) or {})})
        while True:
            command = ctx.channel.next_command()
            if command is None or command.get("op") == "finish":
                finish(0)
            seq = int(command.pop("seq"))
            op = command.pop("op")
            ctx.phase(op)
            payload = commands[op](ctx, state, **command)
            ctx.channel.send("reply", seq=seq, payload={"status": "ok", **payload})
    except BaseException as exc:  # noqa: BLE001
        message = ctx.failure_message(exc)
        try:
            ctx.channel.send("reply", seq=seq, payload=message)
        except BaseException:  # noqa: BLE001
            finish(3)
        finish(0)
