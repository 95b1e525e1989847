"""The compile step: build a candidate's extensions into the build cache in a
worker that sees no GPU, so Snakemake can compile on CPU cores in parallel and
the evaluation (on a GPU) finds every build cached.

Build failures are classified by classify.classify_build, the function the
evaluation uses; problems that are not build failures (an exception while
importing the candidate) are recorded as `deferred` for the evaluation."""

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
                      cuda_arch: str | None = None, build_sharing: str = "candidate") -> dict[str, Any]:
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
        "compile_s": 0.0, "wall_s": None, "log": None, "builds": [], "deferred": None,
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
    env = sandbox.child_env(devices.worker_env(str(build_root), cuda_arch=arch, hide_gpus=True))
    mechanism = confine.mechanism()
    record["confinement"] = mechanism
    with tempfile.TemporaryDirectory(prefix="kernelsweep-compile-") as tmp:
        spec = confine.worker_spec(private=Path(tmp), readable=[candidate], writable=[build_root],
                                   hide=[cache_root, candidate.parent], memory_limit=None) \
            if mechanism == confine.NAMESPACES else None
        outcome = sandbox.run_worker("kernelsweep.evaluator.workers.compile", config, log_path=log_path,
                                     cwd=Path(tmp), run_limit_s=timeout_s, build_limit_s=timeout_s, env=env,
                                     label="compile", confinement=spec)
    if outcome.confinement_failed:
        raise HarnessError(confine.failure_message(outcome.log_excerpt[-2000:]), log=outcome.log)
    record["log"] = outcome.log
    record["compile_s"] = round(outcome.build_s, 3)
    if outcome.interrupted_build:
        sandbox.remove_stale_lock(outcome.interrupted_build)
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
    return done()
