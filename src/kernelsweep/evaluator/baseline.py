"""Baselines: time eager PyTorch and the other baseline modes (torch.compile,
CUDA-graph replay, cuDNN benchmark mode) on a reference, each mode in its own
worker with its own time limit, so one mode failing (or hanging in
autotuning) costs only that mode. A mode's worker times it interleaved with
eager on the same inputs (settings.UNPAIRED_MODES excepted): the record keeps
both sets of samples, and `vs_eager`, the mode's speedup over that eager with
its interval, carries no drift between processes."""

from __future__ import annotations

import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

from kernelsweep.core import fileio, metrics
from kernelsweep.runtime import gpu_slots
from kernelsweep.evaluator import classify, sandbox, settings
from kernelsweep.evaluator.errors import HarnessError

SCHEMA = "kernelsweep/baseline/1"
DEFAULTS = settings.BaselineSettings()
LOOKAHEAD = 2  # mode workers warming beyond the one that times (each holds the model on the host)
CPU_SKIPS = {"inductor-reduce-overhead": "reduce-overhead captures CUDA graphs; on the CPU it has no meaning",
             "cuda-graph": "CUDA graphs need a CUDA device; on the CPU the mode has no meaning",
             "cudnn-benchmark": "cuDNN runs on CUDA devices only; on the CPU the mode is eager PyTorch"}


def run_baseline(reference: Path, *, device: str = "cuda", precision: str = "fp32",
                 modes: tuple[str, ...] | list[str] = DEFAULTS.modes, timing_trials: int = DEFAULTS.timing_trials,
                 warmup: int = DEFAULTS.warmup, timeout_s: float = DEFAULTS.timeout_s, task: str | None = None,
                 log_dir: Path | None = None) -> dict[str, Any]:
    if device not in settings.DEVICES:
        raise HarnessError(f"device must be one of {', '.join(settings.DEVICES)}, not {device!r}")
    if precision not in settings.PRECISIONS:
        raise HarnessError(f"precision must be one of {', '.join(settings.PRECISIONS)}, not {precision!r}")
    unknown = [m for m in modes if m not in settings.BASELINE_MODES]
    if unknown or not modes:
        raise HarnessError(f"unknown baseline mode(s) {', '.join(unknown) or '(none given)'}; "
                           f"choose from {', '.join(settings.BASELINE_MODES)}")
    if timing_trials < 2 or warmup < 0 or timeout_s <= 0:
        raise HarnessError("timing-trials must be at least 2, warmup non-negative and the timeout positive")
    reference = Path(reference).resolve()
    try:
        task_sha = fileio.sha256_text(reference.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise HarnessError(f"cannot read reference {reference}: {exc}") from None
    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelsweep-baseline-"))
    seeds = {"init": settings.INIT_SEED, "trial_base": settings.TRIAL_SEED_BASE,
             "timing_base": settings.TIMING_SEED_BASE}
    env = sandbox.child_env({"CUDA_VISIBLE_DEVICES": ""} if device == "cpu" else None)
    results: dict[str, Any] = {}
    for mode in modes:
        if device == "cpu" and mode in CPU_SKIPS:
            results[mode] = {"status": "skipped", "runtime_ms": None, "error": None, "reason": CPU_SKIPS[mode]}
    timed = [m for m in modes if m not in results]
    base = {"device": device, "precision": precision, "reference": str(reference), "seeds": seeds,
            "warmup": warmup, "timing_trials": timing_trials, "pool_bytes": settings.TIMING_POOL_BYTES[device],
            "memory_limit": settings.cpu_memory_limit(None) if device == "cpu" else None,
            "await_go": gpu_slots.late_claim()}

    def start(mode: str) -> _ModeWorker:
        return _ModeWorker(mode, lambda cwd: sandbox.Worker(
            "kernelsweep.evaluator.untrusted.baseline", dict(base, mode=mode), log_path=logs / f"baseline-{mode}.log",
            cwd=cwd, env=env, run_limit_s=timeout_s, build_limit_s=timeout_s, label=mode))

    info: dict[str, Any] = {}
    device_s: dict[str, float] = {}
    with _device_turn(timed, start, task or reference.stem, device_s) as outcomes:
        for mode, outcome, held in outcomes:
            failure = classify.classify_outcome(outcome)
            if failure is not None:
                results[mode] = {"status": "failed", "runtime_ms": None, "error": failure.message,
                                 "category": failure.category, "log": outcome.log,
                                 "wall_s": round(outcome.wall_s, 3), "stage_s": held}
                continue
            r = outcome.result
            info = info or r.get("device_info", {})
            results[mode] = {"status": "ok", "runtime_ms": _timing(r["samples"]),
                             "paired_eager_ms": _timing(r["eager_samples"]) if r.get("eager_samples") else None,
                             "error": None, "compile_s": r.get("compile_s"), "pool_sets": r.get("pool_sets"),
                             "log": outcome.log, "wall_s": round(outcome.wall_s, 3),
                             "stage_s": dict(r.get("stage_s") or {}, **held)}
    results = {m: results[m] for m in modes}  # the order asked for
    for mode, entry in results.items():
        if mode != "eager" and entry["status"] == "ok":
            entry["vs_eager"] = vs_eager(entry, results.get("eager"))
    return {
        "schema": SCHEMA, "task": task or reference.stem, "device": device, "device_name": info.get("device_name"),
        "precision": precision, "modes": results, "stage_s": device_s,
        "provenance": {"task_sha256": task_sha, "torch": info.get("torch"), "cuda": info.get("cuda"),
                       "driver": info.get("driver"), "python": info.get("python"), "seeds": seeds,
                       "timing_trials": timing_trials, "warmup": warmup, "harness": settings.HARNESS_VERSION,
                       "visible_devices": info.get("visible_devices")},
    }


def _timing(samples: list[float]) -> dict[str, Any]:
    return dict(metrics.summarize(samples), samples=samples)


def vs_eager(entry: dict[str, Any], eager: dict[str, Any] | None) -> dict[str, Any] | None:
    """The mode's speedup over eager PyTorch (eager / mode) with its interval and verdict
    (metrics.compare_timings, default margin): over the eager samples timed beside it
    (`paired`), else over the eager mode's own worker, whose drift it then carries; None
    without a usable eager."""
    paired = entry.get("paired_eager_ms")
    if paired is None and (eager or {}).get("status") != "ok":
        return None
    anchor = (paired or eager["runtime_ms"])["samples"]
    return dict(metrics.compare_timings(anchor, entry["runtime_ms"]["samples"]), paired=paired is not None)


class _ModeWorker:
    """One mode's worker and the scratch folder it runs in (named after the
    mode, removed with it)."""

    def __init__(self, mode: str, make: Callable[[Path], sandbox.Worker]):
        self._tmp = tempfile.TemporaryDirectory(prefix=f"kernelsweep-baseline-{mode}-")
        self.worker = make(Path(self._tmp.name)).start()

    def outcome(self) -> sandbox.Outcome:
        try:
            return self.worker.wait()
        finally:
            self._tmp.cleanup()


@contextmanager
def _device_turn(modes: list[str], start: Callable[[str], _ModeWorker], task: str,
                 stage_s: dict[str, float]) -> Iterator[Iterator[tuple[str, sandbox.Outcome, dict[str, float]]]]:
    """Yields (mode, outcome, the mode's device seconds) in order. Under `gpu-slots run --late` each mode
    takes the device only once its worker has imported torch (and the
    compiler) and built the model, and gives it back when that worker has
    exited: a compile mode's worker still importing the compiler when the
    eager mode (~1 s) is done never holds the device idle, and another job may
    time in between. The next LOOKAHEAD workers warm while a mode times.
    `stage_s` gets the job's `warm` (to the first claim) and the sums of
    `slot_wait` and `device_held`; each mode its own `held` (from its claim to
    its worker's exit) and `slot_wait`. Elsewhere each worker runs in turn,
    the wrapper already holds the slot, and a mode's device seconds are {}."""
    late = gpu_slots.late_claim()
    if not modes:
        yield iter(())
        return
    if not late:
        yield ((mode, start(mode).outcome(), {}) for mode in modes)
        return
    running: list[_ModeWorker] = []

    def start_ahead(i: int) -> None:
        """Workers started up to LOOKAHEAD modes past mode i: each imports torch
        (and the compiler) and builds the model while the modes before it run."""
        while len(running) < min(len(modes), i + 1 + LOOKAHEAD):
            running.append(start(modes[len(running)]))

    def turns() -> Iterator[tuple[str, sandbox.Outcome, dict[str, float]]]:
        warming = time.monotonic()
        start_ahead(0)
        for i, mode in enumerate(modes):
            current = running[i]
            current.worker.hello()  # False when it ended first: its outcome tells why
            start_ahead(i + 1)
            turn: dict[str, float] = {}
            with gpu_slots.accounted_turn(f"baseline {task} {mode}", turn, warming):
                current.worker.send("go")
                current.worker.wait()  # its scratch folder goes after the device is given back
            outcome = current.outcome()
            stage_s.setdefault("warm", turn["warm"])
            for key in ("slot_wait", "device_held"):
                stage_s[key] = round(stage_s.get(key, 0.0) + turn[key], 3)
            warming = time.monotonic()
            yield mode, outcome, {"held": turn["device_held"], "slot_wait": turn["slot_wait"]}

    try:
        yield turns()
    finally:
        for mode_worker in running:  # a failure of this process: no worker is left waiting for "go"
            mode_worker.worker.abort()
            mode_worker.outcome()
