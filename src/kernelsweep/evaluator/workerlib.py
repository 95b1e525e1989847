"""The frame every worker child runs in: read the private configuration, set
host limits, run the worker's body, and send exactly one result (or the
structured description of the exception that stopped it), then leave at once."""

from __future__ import annotations

import sys
from typing import Any, Callable

from kernelsweep.evaluator.channel import Channel, finish, read_config


class InterfaceProblem(Exception):
    """ModelNew is missing or does not fit the reference's calling convention."""


class WorkerContext:
    def __init__(self) -> None:
        self.config: dict[str, Any] = read_config()
        self.channel = Channel(self.config)
        self.phase_name = "start"
        self.candidate_file: str | None = None
        self.candidate_names: frozenset[str] = frozenset(self.config.get("candidate_names", []))
        self.hooks = None  # BuildHooks, once installed

    def phase(self, name: str) -> None:
        self.phase_name = name
        self.channel.phase(name)

    def describe(self, exc: BaseException) -> dict[str, Any]:
        from kernelsweep.evaluator.harness import describe_exception

        return describe_exception(
            exc, self.phase_name, candidate_file=self.candidate_file, candidate_names=self.candidate_names,
            build_failures=self.hooks.failures if self.hooks else None,
            extension_modules=self.hooks.module_names if self.hooks else frozenset())

    def extras(self) -> dict[str, Any]:
        """What is worth reporting even when the body failed."""
        if self.hooks is None:
            return {}
        return {"builds": self.hooks.summary(), "compile_s": self.hooks.compile_s}


def _log_traceback(exc: BaseException) -> None:
    """Into the worker's log, for whoever reads it later (stderr may be closed)."""
    import traceback

    try:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        sys.stderr.flush()
    except Exception:  # noqa: BLE001
        pass


def run(body: Callable[[WorkerContext], dict[str, Any]]) -> None:
    try:
        ctx = WorkerContext()
    except Exception:
        finish(2)  # no configuration: nothing can be reported
        return
    try:
        from kernelsweep.evaluator.harness import set_limits

        set_limits(ctx.config.get("device", "cpu"), ctx.config.get("memory_limit"))
        payload = body(ctx)
        message = {"status": "ok", **payload}
    except InterfaceProblem as exc:
        message = {"status": "interface_error", "message": str(exc), "phase": ctx.phase_name, **ctx.extras()}
    except BaseException as exc:  # noqa: BLE001 - everything a candidate raises is data
        _log_traceback(exc)
        try:
            message = {"status": "error", "error": ctx.describe(exc), **ctx.extras()}
        except BaseException as inner:  # noqa: BLE001
            message = {"status": "error", "error": {"type": type(exc).__name__, "message": str(exc)[-2000:],
                                                    "phase": ctx.phase_name, "describe_failed": repr(inner)}}
    try:
        ctx.channel.result(message)
    except BaseException:  # noqa: BLE001 - the report pipe is gone: the parent sees no result
        finish(3)
    finish(0)
