"""Baselines: time eager PyTorch and torch.compile modes on a reference, each
mode in its own worker with its own time limit, so one mode failing (or
hanging in autotuning) costs only that mode."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from kernelsweep import fileio, metrics
from kernelsweep.evaluator import classify, sandbox, settings
from kernelsweep.evaluator.errors import HarnessError

SCHEMA = "kernelsweep/baseline/1"
CPU_SKIPS = {"inductor-reduce-overhead": "reduce-overhead captures CUDA graphs; on the CPU it has no meaning"}


def run_baseline(reference: Path, *, device: str = "cuda", precision: str = "fp32",
                 modes: tuple[str, ...] | list[str] = settings.BASELINE_MODES, timing_trials: int = 100,
                 warmup: int = 5, timeout_s: float = 600.0, task: str | None = None,
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
    info: dict[str, Any] = {}
    for mode in modes:
        if device == "cpu" and mode in CPU_SKIPS:
            results[mode] = {"status": "skipped", "runtime_ms": None, "error": None, "reason": CPU_SKIPS[mode]}
            continue
        config = {"device": device, "precision": precision, "mode": mode, "reference": str(reference),
                  "seeds": seeds, "warmup": warmup, "timing_trials": timing_trials,
                  "pool_bytes": settings.TIMING_POOL_BYTES[device],
                  "memory_limit": settings.cpu_memory_limit(None) if device == "cpu" else None}
        with tempfile.TemporaryDirectory(prefix="kernelsweep-baseline-") as tmp:
            outcome = sandbox.run_worker("kernelsweep.evaluator.workers.baseline", config,
                                         log_path=logs / f"baseline-{mode}.log", cwd=Path(tmp),
                                         run_limit_s=timeout_s, build_limit_s=timeout_s, env=env, label=mode)
        failure = classify.classify_outcome(outcome)
        if failure is not None:
            results[mode] = {"status": "failed", "runtime_ms": None, "error": failure.message,
                             "category": failure.category, "log": outcome.log, "wall_s": round(outcome.wall_s, 3)}
            continue
        r = outcome.result
        info = info or r.get("device_info", {})
        results[mode] = {"status": "ok", "runtime_ms": dict(metrics.summarize(r["samples"]), samples=r["samples"]),
                         "error": None, "compile_s": r.get("compile_s"), "pool_sets": r.get("pool_sets"),
                         "log": outcome.log, "wall_s": round(outcome.wall_s, 3)}
    return {
        "schema": SCHEMA, "task": task or reference.stem, "device": device, "device_name": info.get("device_name"),
        "precision": precision, "modes": results,
        "provenance": {"task_sha256": task_sha, "torch": info.get("torch"), "cuda": info.get("cuda"),
                       "driver": info.get("driver"), "python": info.get("python"), "seeds": seeds,
                       "timing_trials": timing_trials, "warmup": warmup, "harness": settings.HARNESS_VERSION,
                       "visible_devices": info.get("visible_devices")},
    }
