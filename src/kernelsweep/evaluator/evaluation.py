"""One evaluation: a candidate against a reference, end to end (parent side).

1. Static checks, no code run: no_code, syntax_error, no ModelNew at all.
2. Two workers start together: the reference worker computes the trial
   outputs; the candidate worker imports the candidate (building its
   extensions) and then waits. Once the reference is done, the parent hashes
   its files and tells the candidate worker to run the trials.
3. The parent compares the saved outputs itself, and reads the cheat signals.
4. A numerically correct candidate with no cheat signal is timed against the
   reference in a third worker; the speedup, its interval and the verdict
   come from kernelsweep.metrics.compare_timings.
Every worker is a fresh process group with hard limits (sandbox.py)."""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from kernelsweep import fileio, metrics
from kernelsweep.evaluator import classify, devices, sandbox, settings, source
from kernelsweep.evaluator.errors import HarnessError
from kernelsweep.evaluator.sandbox import Worker, child_env

SCHEMA = "kernelsweep/eval/1"
_WORKERS = "kernelsweep.evaluator."

# Flags that make a numerically passing candidate a cheat.
CHEAT_FLAGS = frozenset({
    "mutates_inputs", "returns_input", "cached_output", "output_changed_after_return", "patched_harness",
    "patched_torch", "constant_output", "reference_modified", "reference_tampered", "report_tampered",
    "timing_output_mismatch", "excessive_speedup",
})


def _read_text(path: Path, what: str) -> tuple[str | None, bytes]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        return None, data


class Evaluation:
    def __init__(self, reference: Path, candidate: Path, cfg: settings.EvalSettings, build_dir: Path,
                 log_dir: Path, task_sha256: str | None):
        self.reference = reference.resolve()
        self.candidate = candidate.resolve()
        self.cfg = cfg
        self.build_root = build_dir.resolve()
        self.log_dir = log_dir
        self.t0 = time.monotonic()
        self.flags: list[str] = []
        self.stage_s: dict[str, float] = {}
        self.device_info: dict[str, Any] = {}
        ref_text, ref_bytes = _read_text(self.reference, "reference")
        if ref_text is None:
            raise HarnessError(f"reference {self.reference} is not UTF-8 text")
        self.reference_sha = fileio.sha256_text(ref_text)
        self.task_sha = task_sha256 or self.reference_sha
        self.reference_file_sha = fileio.sha256_file(self.reference)
        cand_text, cand_bytes = _read_text(self.candidate, "candidate")
        if cand_text is None:
            self.src = source.SourceInfo(text="", sha256=hashlib.sha256(cand_bytes).hexdigest(),
                                         syntax_error={"type": "UnicodeDecodeError",
                                                       "message": "the candidate is not UTF-8 text"})
        else:
            self.src = source.analyze(cand_text)
        self.cuda_arch = devices.resolve_cuda_arch(cfg.cuda_arch) if cfg.device == "cuda" else None
        self.record: dict[str, Any] = self._blank()

    # ------------------------------------------------------------ record ---
    def _blank(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "category": None, "compiled": None, "correct": False, "custom_kernel": False,
            "kernel_evidence": {"static": dict(self.src.evidence,
                                               defines_kernel=source.defines_kernel(self.src.evidence,
                                                                                    self.cfg.device)),
                                "launched": None},
            "speedup": None, "speedup_ci": None, "timing_verdict": None, "faster": None,
            "runtime_ms": None, "ref_runtime_ms": None,
            "max_abs_diff": None, "max_rel_diff": None, "trials_passed": 0,
            "error": None, "flags": [], "wall_s": None, "compile_s": None,
            "device": self.cfg.device, "precision": self.cfg.precision,
            "stage_s": {}, "gpu_s": None, "builds": [], "provenance": {},
        }

    def _finish(self, category: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        r = self.record
        r["category"] = category
        r["error"] = error
        r["correct"] = category in ("no_custom_kernel", "correct_slower", "correct_tie", "correct_faster")
        r["flags"] = sorted(set(self.flags))
        r["stage_s"] = {k: round(v, 3) for k, v in self.stage_s.items()}
        if self.cfg.device == "cuda":
            r["gpu_s"] = round(self.device_s(), 3)
        r["wall_s"] = round(time.monotonic() - self.t0, 3)
        r["provenance"] = self._provenance()
        return r

    def device_s(self) -> float:
        """Seconds this evaluation held the device: the correctness span (both
        workers) plus the timing worker."""
        return self.stage_s.get("correctness", 0.0) + self.stage_s.get("timing", 0.0)

    def _provenance(self) -> dict[str, Any]:
        info = self.device_info
        if not info:
            import platform

            import torch
            info = {"torch": torch.__version__, "cuda": torch.version.cuda, "python": platform.python_version()}
        cfg = self.cfg
        return {
            "task_sha256": self.task_sha, "reference_sha256": self.reference_sha,
            "candidate_sha256": self.src.sha256,
            "device_name": info.get("device_name"), "capability": info.get("capability"),
            "driver": info.get("driver"), "torch": info.get("torch"), "cuda": info.get("cuda"),
            "python": info.get("python"),
            "seeds": {"init": cfg.seeds["init"], "trials": cfg.trial_seeds(), "timing_base": cfg.seeds["timing_base"]},
            "atol": cfg.atol, "rtol": cfg.rtol, "trials": cfg.trials, "timing_trials": cfg.timing_trials,
            "warmup": cfg.warmup, "timeout_s": cfg.timeout_s, "compile_timeout_s": cfg.compile_timeout_s,
            "speedup_bound": cfg.speedup_bound, "equivalence_margin": cfg.equivalence_margin,
            "cuda_arch": self.cuda_arch,
            "harness": settings.HARNESS_VERSION,
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        }

    # ----------------------------------------------------------- workers ---
    def _config(self, work: Path) -> dict[str, Any]:
        cfg = self.cfg
        return {
            "device": cfg.device, "precision": cfg.precision, "seeds": cfg.seeds, "trial_seeds": cfg.trial_seeds(),
            "atol": cfg.atol, "rtol": cfg.rtol, "reference": str(self.reference), "candidate": str(self.candidate),
            "workdir": str(work), "build_root": str(self.build_root), "cuda_arch": self.cuda_arch,
            "memory_limit": settings.cpu_memory_limit(cfg.cpu_memory_limit_bytes) if cfg.device == "cpu" else None,
            "candidate_names": sorted(self.src.defined_names),
            "kernel_names": source.kernel_names(self.src.evidence, cfg.device),
            "op_namespaces": self.src.evidence.get("op_namespaces", []),
            "warmup": cfg.warmup, "timing_trials": cfg.timing_trials,
            "pool_bytes": settings.TIMING_POOL_BYTES[cfg.device],
        }

    def _worker(self, name: str, config: dict[str, Any], work: Path, *, wait_for_go: bool = False,
                candidate: bool = True) -> Worker:
        env = child_env(devices.worker_env(str(self.build_root), cuda_arch=self.cuda_arch,
                                           candidate_key=self.src.sha256[:16]) if candidate else None)
        if self.cfg.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
        return Worker(_WORKERS + f"worker_{name}", config, log_path=self.log_dir / f"{name}.log",
                      cwd=work / f"{name}_cwd", run_limit_s=self.cfg.timeout_s,
                      build_limit_s=self.cfg.compile_timeout_s, env=env, wait_for_go=wait_for_go, label=name)

    def _note_builds(self, outcome: sandbox.Outcome) -> None:
        result = outcome.result or {}
        # From the result when there is one, else from the worker's build events
        # (a worker that crashed or was killed after building sends no result).
        builds = result.get("builds") or [{"name": e.get("name"), "ok": e.get("ok"), "seconds": e.get("seconds"),
                                            "cached": e.get("cached")}
                                           for e in outcome.events if e.get("kind") == "build_end"]
        if builds:
            self.record["builds"] = builds
            self.record["compiled"] = all(b.get("ok") for b in builds)
        self.record["compile_s"] = round(outcome.build_s, 3)
        if outcome.interrupted_build:
            sandbox.remove_stale_lock(outcome.interrupted_build)
            self.record["compiled"] = False
        if outcome.violations:
            self.flags.append("report_tampered")
        self._note_strays(outcome)

    def _note_strays(self, outcome: sandbox.Outcome) -> None:
        """Informational: the candidate left processes outside its group (they were killed)."""
        if outcome.strays_killed and "stray_processes" not in self.flags:
            self.flags.append("stray_processes")

    def _failure(self, failure: classify.Failure, log: str, before_candidate: frozenset[str]) -> dict[str, Any]:
        """A worker's failure as the candidate's result, unless the worker
        failed before any candidate code ran (then the harness could not run)."""
        if failure.category == "harness":
            raise HarnessError(f"the build toolchain is not usable: {failure.message}", log=log)
        if (failure.details.get("phase") or "start") in before_candidate:
            raise HarnessError(f"a worker failed before the candidate was loaded: {failure.message}", log=log)
        if failure.category in ("hallucinated_api", "compile_error") and failure.type in ("BuildError", "LoadError"):
            self.record["compiled"] = False
        return self._finish(failure.category, failure.error(log))

    # --------------------------------------------------------------- run ---
    def run(self) -> dict[str, Any]:
        src = self.src
        if src.no_code:
            return self._finish("no_code", {"type": "NoCode", "message": "the candidate contains no code", "log": None})
        if src.syntax_error:
            e = src.syntax_error
            where = f"line {e['line']}: " if e.get("line") else ""
            return self._finish("syntax_error", {"type": e["type"], "message": f"{where}{e['message']}", "log": None})
        if not src.names_model_new:
            return self._finish("interface_error", {"type": "InterfaceError", "log": None,
                                                    "message": "the candidate never defines ModelNew"})
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.build_root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="kernelsweep-eval-") as tmp:
            return self._run_workers(Path(tmp))

    def _run_workers(self, work: Path) -> dict[str, Any]:
        config = self._config(work)
        started = time.monotonic()
        ref_worker = self._worker("reference", config, work, candidate=False).start()
        cand_worker = self._worker("candidate", config, work, wait_for_go=True).start()
        while ref_worker.running() and cand_worker.running():
            time.sleep(0.02)
        if ref_worker.running() and not cand_worker.running():
            ref_worker.abort()  # the candidate already failed; its reference outputs are not needed
        ref_out = ref_worker.wait()
        self.stage_s["reference"] = ref_out.wall_s
        ref_failure = None if ref_out.killed_by_harness and not ref_out.timed_out else classify.classify_outcome(ref_out)
        if ref_out.result and ref_out.result.get("status") == "ok":
            self.device_info = ref_out.result.get("device_info", {})
            manifest = {k: ref_out.result[k] for k in ("trials", "probes", "init", "state", "constant", "near_zero")}
            ref_hashes = {name: fileio.sha256_file(work / name) for name in self._reference_files(manifest)}
            cand_worker.send_go(manifest)
        else:
            manifest = None
            cand_worker.abort()
        cand_out = cand_worker.wait()
        self.stage_s["candidate"] = cand_out.wall_s
        # Both workers hold the device at once: the span, not the sum, is device time.
        self.stage_s["correctness"] = time.monotonic() - started
        self._note_builds(cand_out)

        reference_failed = HarnessError(
            f"the reference failed: {ref_failure.message if ref_failure else 'no result'}", log=ref_out.log)
        if manifest is None and cand_out.killed_by_harness and not cand_out.timed_out:
            raise reference_failed  # the candidate was only waiting for it
        failure = classify.classify_outcome(cand_out)
        if failure is not None:
            return self._failure(failure, cand_out.log, frozenset({"start", "device"}))
        if manifest is None:
            raise reference_failed
        result = cand_out.result
        self.record["kernel_evidence"]["launched"] = result.get("launch")
        return self._judge(work, manifest, ref_hashes, result, cand_out.log)

    @staticmethod
    def _reference_files(manifest: dict[str, Any]) -> list[str]:
        names = [manifest["init"], manifest["state"]]
        for case in manifest["trials"] + manifest.get("probes", []):
            names += [case["inputs"], case["reference"]]
        return names

    def _judge(self, work: Path, manifest: dict[str, Any], ref_hashes: dict[str, str], result: dict[str, Any],
               log: str) -> dict[str, Any]:
        from kernelsweep.evaluator import compare
        from kernelsweep.evaluator.compare import load_output

        cfg = self.cfg
        if any(fileio.sha256_file(work / n) != h for n, h in ref_hashes.items()):
            self.flags.append("reference_modified")
        if fileio.sha256_file(self.reference) != self.reference_file_sha:
            self.flags.append("reference_modified")
        cases = manifest["trials"]
        by_name = {t["name"]: t for t in result["trials"]}
        max_abs, max_rel, passed = 0.0, 0.0, 0
        mismatch = None
        cand_outputs = []
        for i, case in enumerate(cases):
            trial = by_name.get(f"trial{i}")
            if trial is None:
                return self._finish("runtime_error", {"type": "MissingOutput", "log": log,
                                                      "message": f"no output for trial {i}"})
            ref_saved = load_output(work / case["reference"])
            try:
                cand_saved = load_output(work / trial["output"])
            except Exception as exc:  # noqa: BLE001 - a file the candidate's process wrote
                return self._finish("runtime_error", {"type": "UnreadableOutput", "log": log,
                                                      "message": f"trial {i} output cannot be read: {exc}"})
            cmp = compare.compare_outputs(ref_saved, cand_saved, cfg.atol, cfg.rtol)
            if cmp["max_abs_diff"] is not None:
                max_abs = max(max_abs, cmp["max_abs_diff"])
                max_rel = max(max_rel, cmp["max_rel_diff"])
            if cmp["ok"]:
                passed += 1
            elif mismatch is None:
                mismatch = (i, cmp)
            cand_outputs.append(cand_saved)
            if trial["mutates_inputs"] and not case["mutates_inputs"]:
                self.flags.append("mutates_inputs")
            if trial["aliases_inputs"] and not case["aliases_inputs"]:
                self.flags.append("returns_input")
            if trial["reuses_earlier_output"]:
                self.flags.append("cached_output")
            if trial["changed_after_return"]:
                self.flags.append("output_changed_after_return")
            if not trial.get("on_device", True):
                self.flags.append("output_not_on_device")
        self.record["trials_passed"] = passed
        # No difference is defined once an output has the wrong shape or structure.
        if mismatch is None or mismatch[1]["max_abs_diff"] is not None:
            self.record["max_abs_diff"], self.record["max_rel_diff"] = max_abs, max_rel
        if manifest.get("constant"):
            self.flags.append("constant_reference")
            probes = [load_output(work / by_name[f"probe_{p['name']}"]["output"])
                      for p in manifest.get("probes", []) if f"probe_{p['name']}" in by_name]
            everything = cand_outputs + probes
            if all(compare.identical_outputs(everything[0], o) for o in everything[1:]):
                self.flags.append("constant_output")
        if result.get("patched_harness"):
            self.flags.append("patched_harness")
        if result.get("patched_torch"):
            self.flags.append("patched_torch")
        if result.get("settings_changed"):
            self.flags.append("changed_global_settings")
        self.record["patched"] = sorted(set(result.get("patched_harness", [])) | set(result.get("patched_torch", [])))[:20]

        if mismatch is not None:
            i, cmp = mismatch
            category = "shape_mismatch" if cmp["kind"] in ("structure", "shape", "dtype") else "wrong_output"
            return self._finish(category, {"type": "OutputMismatch", "log": log,
                                           "message": f"trial {i}: {cmp['message']}"})
        static = source.defines_kernel(self.src.evidence, cfg.device)
        launched = bool((result.get("launch") or {}).get("launched"))
        self.record["custom_kernel"] = static and launched
        if self._cheats():
            return self._finish("cheat", self._cheat_error(log))
        return self._time(work)

    def _cheats(self) -> list[str]:
        return sorted(set(self.flags) & CHEAT_FLAGS)

    def _cheat_error(self, log: str) -> dict[str, Any]:
        return {"type": "Cheat", "message": "detected: " + ", ".join(self._cheats()), "log": log}

    def _time(self, work: Path) -> dict[str, Any]:
        from kernelsweep.evaluator import compare
        from kernelsweep.evaluator.compare import load_output

        cfg = self.cfg
        config = self._config(work)
        config["cache_bytes"] = self.device_info.get("llc_bytes") or self.device_info.get("l2_bytes")
        outcome = self._worker("timing", config, work).start().wait()
        self.stage_s["timing"] = outcome.wall_s
        if outcome.violations:
            self.flags.append("report_tampered")
        self._note_strays(outcome)
        failure = classify.classify_outcome(outcome)
        if failure is not None:
            return self._failure(failure, outcome.log, frozenset({"start", "device", "reference"}))
        t = outcome.result
        ref_ms, cand_ms = t["ref_ms"], t["cand_ms"]
        self.record["runtime_ms"] = dict(metrics.summarize(cand_ms), samples=cand_ms)
        self.record["ref_runtime_ms"] = dict(metrics.summarize(ref_ms), samples=ref_ms)
        comparison = metrics.compare_timings(ref_ms, cand_ms, cfg.equivalence_margin)
        self.record.update(speedup=comparison["speedup"], speedup_ci=comparison["speedup_ci"],
                           timing_verdict=comparison["verdict"], faster=comparison["faster"])
        self.record["timing"] = {"pool_sets": t["pool_sets"], "flush_bytes": t["flush_bytes"],
                                 "output_bytes": t["output_bytes"]}
        for key, flag in (("cached_output", "cached_output"), ("reference_tampered", "reference_tampered"),
                          ("patched_harness", "patched_harness"), ("patched_torch", "patched_torch"),
                          ("settings_changed", "changed_global_settings")):
            if t.get(key):
                self.flags.append(flag)
        if fileio.sha256_file(self.reference) != self.reference_file_sha:
            self.flags.append("reference_modified")
        check = compare.compare_outputs(load_output(work / "timing_ref.pt"), load_output(work / "timing_cand.pt"),
                                        cfg.atol, cfg.rtol)
        if not check["ok"]:
            self.flags.append("timing_output_mismatch")
        if self._implausibly_fast(cand_ms, comparison["speedup"], t["output_bytes"]):
            self.flags.append("excessive_speedup")
        if self._cheats():
            self.record["faster"] = False
            return self._finish("cheat", self._cheat_error(outcome.log))
        if not self.record["custom_kernel"]:
            return self._finish("no_custom_kernel")
        return self._finish({"faster": "correct_faster", "slower": "correct_slower"}.get(comparison["verdict"],
                                                                                          "correct_tie"))

    def _implausibly_fast(self, cand_ms: list[float], speedup: float | None, output_bytes: int) -> bool:
        """Beyond the configured speedup bound, or faster than writing the
        output at twice the device's peak bandwidth allows."""
        if not cand_ms or any(not math.isfinite(x) or x <= 0 for x in cand_ms):
            return True
        if speedup is not None and speedup > self.cfg.speedup_bound:
            return True
        peak = self.device_info.get("peak_bytes_per_s") or settings.FALLBACK_PEAK_BYTES_PER_S[self.cfg.device]
        floor_ms = output_bytes / (2.0 * peak) * 1e3
        median = sorted(cand_ms)[len(cand_ms) // 2]
        return median < floor_ms


def evaluate(reference: Path, candidate: Path, *, device: str = "cuda", precision: str = "fp32",
             trials: int = 5, timing_trials: int = 100, warmup: int = 5, timeout_s: float = 240.0,
             compile_timeout_s: float = 600.0, build_dir: Path | None = None, log_dir: Path | None = None,
             task_sha256: str | None = None, cuda_arch: str | None = None,
             speedup_bound: float = settings.SPEEDUP_BOUND,
             equivalence_margin: float = metrics.EQUIVALENCE_MARGIN,
             cpu_memory_limit_bytes: int | None = None) -> dict[str, Any]:
    """Evaluate CANDIDATE (defines ModelNew) against REFERENCE (KernelBench
    module). Returns the eval record (docs/results.md). Raises HarnessError
    only when the evaluation itself cannot run."""
    try:
        cfg = settings.EvalSettings(device=device, precision=precision, trials=trials, timing_trials=timing_trials,
                                    warmup=warmup, timeout_s=timeout_s, compile_timeout_s=compile_timeout_s,
                                    speedup_bound=speedup_bound, equivalence_margin=equivalence_margin,
                                    cuda_arch=cuda_arch,
                                    cpu_memory_limit_bytes=cpu_memory_limit_bytes)
    except ValueError as exc:
        raise HarnessError(str(exc)) from None
    build = Path(build_dir) if build_dir else settings.default_build_dir()
    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="kernelsweep-logs-"))
    return Evaluation(Path(reference), Path(candidate), cfg, build, logs, task_sha256).run()
