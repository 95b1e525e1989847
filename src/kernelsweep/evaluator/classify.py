"""From structured signals to one failure category (see docs/taxonomy.md).

The signals: a worker's exit status and signal, whether the harness killed it
at a limit (and in which phase), the exception a worker caught (its type and
attributes, described in untrusted/failures.describe_exception), a failed build's
compiler/linker diagnostics (diagnostics.py) and the worker's own interface
checks. The compile step and the evaluation classify builds through the same
function."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from kernelsweep.evaluator import diagnostics
from kernelsweep.core.verdict import first_category

CRASH_CUDA_ERRORS = frozenset({
    "cudaErrorIllegalAddress", "cudaErrorMisalignedAddress", "cudaErrorLaunchFailure",
    "cudaErrorIllegalInstruction", "cudaErrorAssert", "cudaErrorHardwareStackError",
    "cudaErrorInvalidAddressSpace", "cudaErrorInvalidPc",
})
OOM_CUDA_ERRORS = frozenset({"cudaErrorMemoryAllocation"})
TIMEOUT_CUDA_ERRORS = frozenset({"cudaErrorLaunchTimeout"})
# Packages whose attributes a candidate may call but cannot invent.
LIBRARY_ROOTS = frozenset({"torch", "triton", "numpy", "cupy", "math", "cutlass", "numba", "scipy", "einops",
                           "jax", "apex", "flash_attn", "xformers", "functools", "itertools", "os", "sys"})
SYNTAX_ERRORS = frozenset({"SyntaxError", "IndentationError", "TabError"})


@dataclass
class Failure:
    category: str
    type: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)

    def error(self, log: str | None) -> dict[str, Any]:
        return {"type": self.type, "message": self.message[:2000], "log": log, **self.details}


def classify_build(record: dict[str, Any]) -> Failure | None:
    """A failed load_inline/load call; None when the call failed before any
    build (bad arguments: classified as an ordinary exception)."""
    kind = record.get("kind")
    output = record.get("output", "")
    if kind == "compile":
        message, chosen, diags = diagnostics.headline(output)
        category = "hallucinated_api" if chosen and chosen.missing else "compile_error"
        return Failure(category, "BuildError", f"extension '{record.get('name')}' failed to build: {message}",
                       {"diagnostics": [d.to_dict() for d in diags[:10]]})
    if kind == "load":
        symbol = diagnostics.undefined_symbol(output)
        category = "hallucinated_api" if symbol and diagnostics.is_library_symbol(symbol) else "compile_error"
        text = f"undefined symbol {symbol}" if symbol else diagnostics.first_line(output)
        return Failure(category, "LoadError", f"extension '{record.get('name')}' built but failed to load: {text}")
    if kind == "toolchain":
        return Failure("harness", "ToolchainError", diagnostics.first_line(output))
    return None


def classify_exception(info: dict[str, Any]) -> Failure:
    """An exception a worker caught, described as data."""
    etype = info.get("type", "Exception")
    short = etype.rsplit(".", 1)[-1]
    message = f"{short}: {diagnostics.first_line(info.get('message', ''))}" if info.get("message") else short
    build = info.get("build_failure")
    if build:
        failure = classify_build(build)
        if failure is not None:
            failure.details["phase"] = info.get("phase")
            return failure
    found: list[tuple[str, str]] = []
    mro = {m.rsplit(".", 1)[-1] for m in info.get("mro", [])}
    if short in SYNTAX_ERRORS or mro & SYNTAX_ERRORS:
        found.append(("syntax_error", "generated or imported code does not parse"))
    library = info.get("raised_in_library")  # not a name the candidate made up: a library failing here
    if library:
        found.append(("runtime_error", f"raised inside {library}, code the candidate calls"))
    elif info.get("missing_module"):
        found.append(("hallucinated_api", f"no module named {info['missing_module']!r}"))
    elif short == "ImportError" and info.get("import_name"):
        found.append(("hallucinated_api", f"a name imported from {info['import_name']!r} does not exist"))
    owner = info.get("owner")
    if short == "AttributeError" and owner and not owner.get("candidate_owned") and not library:
        root = (owner.get("name") if owner["kind"] == "module" else owner.get("module") or "").split(".")[0]
        if owner["kind"] == "module" or root in LIBRARY_ROOTS:
            found.append(("hallucinated_api", f"{owner.get('name')} has no attribute {info.get('attribute')!r}"))
    if short == "NameError" and info.get("undefined_name"):
        found.append(("hallucinated_api", f"name {info['undefined_name']!r} is not defined"))
    kw = info.get("unexpected_keyword")
    if kw and not kw.get("callee_is_candidates"):
        found.append(("hallucinated_api", f"{kw['callee']}() has no parameter {kw['keyword']!r}"))
    if info.get("oom"):
        found.append(("out_of_memory", "allocation failed"))
    cuda = info.get("cuda_error")
    if cuda in CRASH_CUDA_ERRORS:
        found.append(("crash", cuda))
    elif cuda in OOM_CUDA_ERRORS:
        found.append(("out_of_memory", cuda))
    elif cuda in TIMEOUT_CUDA_ERRORS:
        found.append(("timeout", cuda))
    found.append(("runtime_error", "exception"))
    category = first_category([c for c, _ in found])
    details = {"phase": info.get("phase")}
    if cuda:
        details["cuda_error"] = cuda
    return Failure(category, short, message, details)


def classify_exit(outcome: Any) -> Failure:
    """A worker that ended without a result."""
    if outcome.timed_out:
        limit = "compile" if outcome.timeout_phase == "compile" else "run"
        return Failure("timeout", "Timeout", f"killed at the {limit} time limit "
                       f"(last phase: {outcome.last_phase or 'start'})", {"phase": outcome.last_phase})
    if outcome.signal:
        try:
            name = signal.Signals(outcome.signal).name
        except ValueError:
            name = f"signal {outcome.signal}"
        if outcome.signal == signal.SIGKILL and not outcome.killed_by_harness:
            # Nobody in the harness sent it: the kernel's OOM killer is the usual sender.
            return Failure("out_of_memory", name, "killed by SIGKILL from outside the harness "
                           "(the kernel's out-of-memory killer)", {"phase": outcome.last_phase})
        return Failure("crash", name, f"worker died by {name} (phase: {outcome.last_phase or 'start'})",
                       {"phase": outcome.last_phase})
    return Failure("runtime_error", "EarlyExit",
                   f"worker exited with status {outcome.returncode} before reporting "
                   f"(phase: {outcome.last_phase or 'start'})", {"phase": outcome.last_phase})


def classify_outcome(outcome: Any) -> Failure | None:
    """None when the worker completed and reported success."""
    result = outcome.result
    if result is None:
        return classify_exit(outcome)
    status = result.get("status")
    if status == "ok":
        return None
    if status == "interface_error":
        return Failure("interface_error", "InterfaceError", result.get("message", "interface mismatch"),
                       {"phase": result.get("phase")})
    return classify_exception(result.get("error") or {})
