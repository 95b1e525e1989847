"""The compile step: build a candidate's extensions into the build cache in a
worker that sees no GPU, so Snakemake can compile on CPU cores in parallel and
the evaluation (on a GPU) finds every build cached.

Build failures are classified by classify.classify_build, the function the
evaluation uses; problems that are not build failures (an exception while
importing the candidate) are recorded as `deferred` for the evaluation.

Builds a candidate makes only when it is constructed or called are built ahead
too, given the task's reference (untrusted/ahead.py): recorded under `ahead`,
they decide nothing here."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

from kernelsweep.evaluator import classify, confine, devices, sandbox, settings, source
from kernelsweep.evaluator.errors import HarnessError

SCHEMA = "kernelsweep/build/1"


def compile_candidate(candidate: Path, *, device: str = "cuda", build_dir: Path | None = None,
                      timeout_s: float = 600.0, log_dir: Path | None = None,
                      cuda_arch: str | None = None, build_sharing: str = "candidate",
                      reference: Path | None = None) -> dict[str, Any]:
    t0 = time.monotonic()
    if device not in settings.DEVICES:
        raise HarnessError(f"device must be one of {', '.join(settings.DEVICES)}, not {device!r}")
    if timeout_s <= 0:
        raise HarnessError("timeout must be positive")
    candidate = Path(candidate).resolve()
    try:
        data = candidate.read_bytes()
    except OSError as exc:
        raise HarnessError(f"cannot read candidate {candidate}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    src = source.analyze_bytes(text, data)
    cache_root = (Path(build_dir) if build_dir else settings.default_build_dir()).resolve()
    build_root = settings.candidate_build_dir(cache_root, src.sha256, build_sharing)
    arch = devices.resolve_cuda_arch(cuda_arch) if device == "cuda" else None
    record: dict[str, Any] = {
        "schema": SCHEMA, "candidate_sha256": src.sha256, "device": device, "cuda_arch": arch,
        "build_dir": str(build_root), "compiled": None, "category": None, "error": None,
        "compile_s": 0.0, "wall_s": None, "log": None, "builds": [], "deferred": None, "ahead": None,
    }

    def done() -> dict[str, Any]:
        record["wall_s"] = round(time.monotonic() - t0, 3)
        return record

    static = source.static_verdict(src)
    if static is not None and static[0] in ("no_code", "syntax_error"):
        record.update(category=static[0], error={k: v for k, v in static[1].items() if k != "log"})
        return done()
    if not src.evidence.get("extension_calls"):
        return done()  # nothing to build

    build_root.mkdir(parents=True, exist_ok=True)
    logs = Path(log_dir) if log_dir else cache_root / "logs"
    log_path = logs / f"compile-{src.sha256[:16]}.log"
    config = {"device": device, "candidate": str(candidate), "build_root": str(build_root), "cuda_arch": arch,
              "candidate_names": sorted(src.defined_names)}
    record["confinement"] = confine.mechanism()
    outcome = _run_builder("compile", config, candidate=candidate, build_root=build_root, cache_root=cache_root,
                           log_path=log_path, run_limit_s=timeout_s, build_limit_s=timeout_s)
    record["log"] = outcome.log
    record["compile_s"] = round(outcome.build_s, 3)
    result = outcome.result or {}
    builds = result.get("builds", [])
    record["builds"] = [{k: v for k, v in b.items() if k != "output"} for b in builds]
    if builds:
        record["compiled"] = all(b.get("ok") for b in builds) and not outcome.interrupted_build
    failed = next((b for b in builds if not b.get("ok")), None)
    failure = classify.classify_build(failed) if failed else None
    if failure is None and (outcome.timed_out or result.get("status") not in (None, "ok")):
        failure = classify.classify_outcome(outcome)
    elif failure is None and outcome.result is None:
        failure = classify.classify_exit(outcome)
    if failure is not None and failure.category == "harness":
        raise HarnessError(f"the build toolchain is not usable: {failure.message}", log=outcome.log)
    if failure is not None and (failure.type in ("BuildError", "LoadError") or failure.category == "timeout"):
        record.update(category=failure.category, error=failure.error(outcome.log))
        if failure.category == "timeout":
            record["compiled"] = False
    elif failure is not None:
        record["deferred"] = {"category": failure.category, "message": failure.message}
    elif result.get("import_error"):
        # Building worked (or nothing was built) but importing the candidate
        # failed here, without a GPU: the evaluation decides.
        hint = classify.classify_exception(result["import_error"])
        if hint.type in ("BuildError", "LoadError"):
            record.update(category=hint.category, error=hint.error(outcome.log), compiled=False)
        else:
            record["deferred"] = {"category": hint.category, "message": hint.message}
    elif failure is None and reference is not None:
        config["reference"] = str(Path(reference).resolve())
        left = max(1.0, timeout_s - (time.monotonic() - t0))
        ahead = _run_builder("ahead", config, candidate=candidate, build_root=build_root, cache_root=cache_root,
                             log_path=logs / f"ahead-{src.sha256[:16]}.log", readable=(Path(reference).resolve(),),
                             run_limit_s=min(AHEAD_RUN_LIMIT_S, left), build_limit_s=left)
        record["ahead"] = _ahead_summary(ahead)
        record["compile_s"] = round(record["compile_s"] + ahead.build_s, 3)
    return done()


# Seconds of the ahead worker's own time (builds not counted): imports and a
# construction on the meta device, where nothing is computed.
AHEAD_RUN_LIMIT_S = 60.0


def _run_builder(kind: str, config: dict[str, Any], *, candidate: Path, build_root: Path, cache_root: Path,
                 log_path: Path, run_limit_s: float, build_limit_s: float,
                 readable: tuple[Path, ...] = ()) -> sandbox.Outcome:
    """One build worker (`compile` or `ahead`), confined, with no GPU visible."""
    env = sandbox.child_env(devices.worker_env(str(build_root), cuda_arch=config.get("cuda_arch"), hide_gpus=True))
    with tempfile.TemporaryDirectory(prefix="kernelsweep-compile-") as tmp:
        spec = confine.worker_spec(private=Path(tmp), readable=[candidate, *readable], writable=[build_root],
                                   hide=[cache_root, candidate.parent], memory_limit=None) \
            if confine.mechanism() == confine.NAMESPACES else None
        outcome = sandbox.run_worker(f"kernelsweep.evaluator.untrusted.{kind}", config, log_path=log_path,
                                     cwd=Path(tmp), run_limit_s=run_limit_s, build_limit_s=build_limit_s, env=env,
                                     label=kind, confinement=spec)
    if outcome.confinement_failed:
        raise HarnessError(confine.failure_message(outcome.log_excerpt[-2000:]), log=outcome.log)
    if outcome.interrupted_build:
        sandbox.remove_stale_lock(outcome.interrupted_build)
    return outcome


def _ahead_summary(outcome: sandbox.Outcome) -> dict[str, Any]:
    """What the ahead worker built and how far the candidate's code got on the
    meta device. A worker that died (a kernel fed meta tensors may crash it)
    sent no result: its build events still say what it built."""
    result = outcome.result or {}
    if "builds" in result:
        builds = [{k: b.get(k) for k in ("name", "ok", "seconds", "cached")} for b in result["builds"]]
    else:
        builds = [{k: e.get(k) for k in ("name", "ok", "seconds", "cached")}
                  for e in outcome.events if e.get("kind") == "build_end"]
    stopped_by = result.get("stopped_by")
    if outcome.result is None:
        stopped_by = "timeout" if outcome.timed_out else f"ended without a result (exit {outcome.returncode}, " \
                                                         f"signal {outcome.signal})"
    return {"builds": builds, "reached": result.get("reached", outcome.last_phase), "stopped_by": stopped_by}
