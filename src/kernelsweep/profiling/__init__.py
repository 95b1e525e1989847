"""`kernelsweep profile`: torch.profiler, FLOP and byte counts and a roofline
verdict for a KernelBench reference, for guided prompts.

    kernelsweep profile REFERENCE.py --device cpu|cuda [--precision fp32]
                        [--out FILE] [--timeout S] [--peak-flops F --peak-bandwidth B]

The reference runs in a child process (kernelsweep.profiling.child) that is
killed at the timeout. A reference that raises is a result, not a crash of
the stage: the record is written with status "error" (phase, message, log
tail), the message goes to stderr, and the exit status is 0 so a study carries
on (guided prompts then say the profile is unavailable). A failure of the
machine (`machine_fault`: the process killed, out of time, no usable device)
is never a result: nothing is written and the exit status is 3, so the next
run profiles again. Bad arguments exit with 2. Python API: profile_reference(...) -> dict,
render_for_prompt(dict) -> str.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, Iterator

from kernelsweep.runtime import gpu_slots, taskcode
from kernelsweep.core.fileio import dumps, sha256_file, write_json
from kernelsweep.profiling.record import SCHEMA
from kernelsweep.profiling.render import render_for_prompt

__all__ = ["SCHEMA", "profile_reference", "render_for_prompt", "configure", "main"]

DEVICES = ("cpu", "cuda")
PRECISIONS = taskcode.PRECISIONS
DEFAULT_TIMEOUT_S = 300.0


def profile_reference(reference: str | os.PathLike, device: str, precision: str = "fp32",
                      timeout_s: float = DEFAULT_TIMEOUT_S, warmup: int = 3, iters: int = 10, seed: int = 0,
                      task: str | None = None, peak_flops: float | None = None,
                      peak_bandwidth: float | None = None) -> dict[str, Any]:
    """Profile a KernelBench reference file; returns the profile record (see
    kernelsweep.profiling.record). Raises ValueError for bad arguments; a
    reference that fails, hangs or crashes gives a record with status 'error'."""
    from kernelsweep.profiling import record
    from kernelsweep.runtime.process_group import describe_exit, read_tail, run_in_group

    path = Path(reference)
    if not path.is_file():
        raise ValueError(f"reference file not found: {path}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {', '.join(DEVICES)}, not {device!r}")
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")
    if iters < 1 or warmup < 0 or not timeout_s > 0:
        raise ValueError("need iters >= 1, warmup >= 0 and a positive timeout")

    identity = {"task": task or path.stem, "reference": str(path), "reference_sha256": sha256_file(path),
                "device": device, "precision": precision, "warmup": warmup, "iters": iters, "seed": seed,
                "timeout_s": timeout_s}
    with tempfile.TemporaryDirectory(prefix="kernelsweep-profile-") as tmp:
        tmp = Path(tmp)
        request = {"reference": str(path.resolve()), "device": device, "precision": precision,
                   "warmup": warmup, "iters": iters, "seed": seed}
        stage_s: dict[str, float] = {}
        turn = None
        if gpu_slots.late_claim():  # the device is taken once the child has built the model on the host
            os.mkfifo(tmp / "go")
            request["await_go"] = str(tmp / "go")
            turn = partial(_device_turn, tmp / "go", timeout_s, f"profile {identity['task']}", stage_s)
        (tmp / "request.json").write_text(json.dumps(request))
        result_path = tmp / "result.json"
        # A reference may spawn workers or hang in native code: its whole group goes at the limit.
        with open(tmp / "child.log", "wb") as log:
            done = run_in_group([*taskcode.child_argv("kernelsweep.profiling.child"), str(tmp / "request.json"),
                                 str(result_path)], timeout_s, stdout=log, stderr=log, turn=turn)
        log_tail = read_tail(tmp / "child.log")
        raw = json.loads(result_path.read_text()) if result_path.exists() else None

    if done.timed_out:
        rec = record.error_record(identity, "Timeout", f"profiling did not finish within {timeout_s:g} s; "
                                  "the profiling process and its children were killed", None, log_tail)
    elif raw is None:
        rec = record.error_record(identity, "ChildFailed", f"the profiling process {describe_exit(done.returncode)} "
                                  "before writing a result", None, log_tail)
    elif raw["status"] != "ok":
        err = raw["error"]
        rec = record.error_record(identity, err["type"], err["message"], err["phase"], log_tail)
    else:
        rec = record.build(identity, raw, peak_flops, peak_bandwidth)
    rec["wall_s"] = done.wall_s
    if stage_s:
        rec["stage_s"] = stage_s
    return rec


@contextmanager
def _device_turn(go: Path, timeout_s: float, label: str, stage_s: dict[str, float],
                 proc: subprocess.Popen) -> Iterator[float]:
    """Under `gpu-slots run --late`: wait (up to the time limit) for the child
    to say it is ready (`go` created as a FIFO that it waits on), then take the
    device and let it go on; held until the child ends. Yields the seconds
    before "go", which do not count against the limit (a child that never gets
    ready is killed at the limit as before)."""
    started = time.monotonic()
    ready = go.with_name("ready")
    while not ready.exists() and proc.poll() is None and time.monotonic() - started < timeout_s:
        time.sleep(0.02)
    if not ready.exists() or proc.poll() is not None:
        yield 0.0
        return
    with gpu_slots.accounted_turn(label, stage_s, started):
        try:
            fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)  # the child holds the reading end open
            try:
                os.write(fd, b"g")
            finally:
                os.close(fd)
        except OSError:
            pass  # it ended after saying ready: its exit status tells the story
        yield time.monotonic() - started


def _quantity(text: str) -> float:
    from kernelsweep.profiling.device_peaks import parse_quantity
    try:
        return parse_quantity(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reference", help="KernelBench-format reference file (Model, get_inputs, get_init_inputs)")
    parser.add_argument("--device", required=True, choices=DEVICES)
    parser.add_argument("--precision", default="fp32", choices=PRECISIONS,
                        help="model and floating inputs are cast to this dtype (default fp32)")
    parser.add_argument("--out", help="write the JSON record here (atomically); "
                        "without it the record goes to stdout")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                        help=f"seconds before the profiling process is killed (default {DEFAULT_TIMEOUT_S:g})")
    parser.add_argument("--task", help="task id stored in the record (default: the file name)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed forwards first (default 3)")
    parser.add_argument("--iters", type=int, default=10, help="forwards timed and profiled (default 10)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peak-flops", type=_quantity, metavar="FLOP/S",
                        help="peak FLOP/s for the roofline, e.g. 67e12 or 67T (for devices not in the table)")
    parser.add_argument("--peak-bandwidth", type=_quantity, metavar="BYTES/S",
                        help="peak memory bandwidth in bytes/s, e.g. 4.8e12 or 4.8T")


# The tasks stage ran every reference once, so these come from the machine
# (killed by the scheduler or the OOM killer, a busy machine past the limit, a
# lost GPU), not from the reference: recording them would change guided prompts.
MACHINE_ERRORS = ("Timeout", "ChildFailed")


def machine_fault(rec: dict) -> str | None:
    """The message of a failed profile that the machine caused, else None."""
    error = rec.get("error") or {}
    if rec.get("status") != "ok" and (error.get("type") in MACHINE_ERRORS or error.get("phase") == "device"):
        return str(error.get("message"))
    return None


def main(args: argparse.Namespace) -> int:
    try:
        rec = profile_reference(args.reference, args.device, args.precision, args.timeout, args.warmup,
                                args.iters, args.seed, args.task, args.peak_flops, args.peak_bandwidth)
    except ValueError as e:
        print(f"kernelsweep profile: error: {e}", file=sys.stderr)
        return 2
    fault = machine_fault(rec)
    if fault is not None:
        print(f"kernelsweep profile: {args.reference}: the machine failed the profiling, nothing was recorded: "
              f"{fault}. Rerun the same command (raise profile.timeout_s if the machine is only slow)",
              file=sys.stderr)
        return 3
    if args.out:
        write_json(args.out, rec)
        print(render_for_prompt(rec))
    else:
        sys.stdout.write(dumps(rec))
    if rec["status"] != "ok":
        print(f"kernelsweep profile: {args.reference}: profiling failed: {rec['error']['message']}", file=sys.stderr)
    return 0
