"""Validate a reference module in a child process with a hard timeout:
reference code is third-party code, so it never runs in our process.

A reference is invalid when it does not import, lacks Model / get_inputs /
get_init_inputs, or raises while building inputs, constructing the model or
running forward. On the CPU with `forward="auto"` the forward check runs only
when inputs and parameters are small (sized on the meta device, without
allocating), within an address-space cap and the timeout; otherwise it is
skipped and the record says why. `forward="always"` (e.g. on a GPU) lifts
the bound and the cap. After the forward, the reference runs on more input
draws: a task whose outputs do not depend on its inputs is marked degenerate.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from kernelsweep.runtime import taskcode
from kernelsweep.runtime.process_group import describe_exit, run_in_group
from kernelsweep.tasks.errors import TaskConfigError, TaskInvalidError

FORWARD_MODES = ("auto", "always", "never")
# 2**24 elements (64 MiB of float32) in inputs + parameters: KernelBench's big
# level-1 problems sit far above, the demo tasks far below.
DEFAULT_MAX_NUMEL = 1 << 24
DEFAULT_TIMEOUT_S = 180.0
# Address space the CPU auto-mode check may add for building and running the
# reference (outputs and intermediates can dwarf the inputs); beyond it the
# forward check is skipped, not failed.
DEFAULT_CPU_MEMORY_MB = 4096


def validate_reference(code: str, task_id: str, *, device: str = "cpu", forward: str = "auto",
                       max_numel: int = DEFAULT_MAX_NUMEL, timeout_s: float = DEFAULT_TIMEOUT_S,
                       cpu_memory_mb: int = DEFAULT_CPU_MEMORY_MB) -> dict:
    """Check one reference; return its validation record or raise TaskInvalidError.

    Record: `device`, `forward` (`ran`|`skipped`), `skip_reason`, `forward_ms`
    (a rough figure: median of a few warm calls,
    or the one cold call of a reference slower than ~1 s), `input_numel`, `param_numel`, `output_shapes`, `warnings`,
    `degenerate` (True: the outputs do not depend on the inputs, so no candidate can be told from a
    constant; None: not checked) and `degenerate_reason` (why, or why it was not checked)."""
    if forward not in FORWARD_MODES:
        raise TaskConfigError(f"forward check mode must be one of {FORWARD_MODES}, got {forward!r}")
    with tempfile.TemporaryDirectory(prefix="kernelsweep-validate-") as tmp:
        reference = Path(tmp) / "reference.py"
        reference.write_text(code, encoding="utf-8")
        result_file = Path(tmp) / "result.json"
        returncode, timed_out, stderr = _run_child(
            [*taskcode.child_argv("kernelsweep.tasks.check_child"), str(reference), str(result_file), device,
             forward, str(max_numel), str(cpu_memory_mb)],
            cwd=tmp, env=_child_env(device), timeout_s=timeout_s,
        )
        state = _read_state(result_file)

    stage = state.get("stage", "start")
    if stage == "dependence" and state.get("ok") and state.get("degenerate") is None \
            and not state.get("degenerate_reason"):
        # The forward ran; only the extra input draws did not finish: valid, degeneracy unknown.
        how = f"did not finish within {timeout_s:g} s" if timed_out else f"the check process {describe_exit(returncode)}"
        state["degenerate_reason"] = f"not checked: {_STAGES[stage]} {how}"
        timed_out = False
    if timed_out:
        if stage in ("construct", "forward") and forward == "auto":
            # Slow is not broken: the evaluator times it on the right device.
            state.update(ok=True, forward="skipped",
                         skip_reason=f"{_STAGES[stage]} did not finish within {timeout_s:g} s on {device}")
        else:
            raise TaskInvalidError(task_id, f"timed out after {timeout_s:g} s during {_STAGES.get(stage, stage)}")
    elif state.get("ok") is None:
        raise TaskInvalidError(task_id, f"the check process died during {_STAGES.get(stage, stage)} "
                                        f"(it {describe_exit(returncode)}){_tail(stderr)}")
    if state.get("environment_error"):
        raise TaskConfigError(f"{task_id}: cannot validate: {state['reason']}")
    if not state["ok"]:
        raise TaskInvalidError(task_id, state["reason"])
    return {
        "device": device,
        "forward": state["forward"],
        "skip_reason": state["skip_reason"],
        "forward_ms": state["forward_ms"],
        "input_numel": state["input_numel"],
        "param_numel": state["param_numel"],
        "output_shapes": state["output_shapes"],
        "warnings": state["warnings"],
        "degenerate": state.get("degenerate"),
        "degenerate_reason": state.get("degenerate_reason"),
    }


_STAGES = {
    "start": "start-up",
    "environment": "start-up (importing torch)",
    "import": "import of the reference",
    "interface": "the interface check",
    "init_inputs": "get_init_inputs()",
    "sizing": "sizing inputs on the meta device",
    "construct": "model construction / get_inputs()",
    "forward": "forward",
    "dependence": "the forward on more input draws (degeneracy check)",
}


def _child_env(device: str) -> dict[str, str]:
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    # Few malloc arenas: each reserves 64 MiB of address space, which would eat
    # the CPU memory cap on a many-core machine.
    env.setdefault("MALLOC_ARENA_MAX", "2")
    if device == "cpu":
        env["CUDA_VISIBLE_DEVICES"] = ""  # a CPU check must not touch (or wait for) a GPU
    return env


def _run_child(cmd: list[str], *, cwd: str, env: dict, timeout_s: float) -> tuple[int | None, bool, str]:
    """Run in its own session so a timeout kills the child and anything it spawned."""
    stderr_path = Path(cwd) / "stderr.txt"
    with open(stderr_path, "wb") as stderr:
        done = run_in_group(cmd, timeout_s, stderr=stderr, cwd=cwd, env=env)
    return done.returncode, done.timed_out, stderr_path.read_text(encoding="utf-8", errors="replace")


def _read_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def _tail(stderr: str, lines: int = 5) -> str:
    text = "\n".join(stderr.strip().splitlines()[-lines:])
    return f":\n{text}" if text else ""
