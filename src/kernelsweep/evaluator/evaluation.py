"""One evaluation: a candidate against a reference, end to end (parent side).

1. Static checks, no code run (source.py): no_code, syntax_error, no ModelNew.
2. Two workers start at once. The reference worker (trusted, unconfined)
   computes the correctness outputs on secret seeds drawn here. The
   candidate worker, confined (confine.py), imports the candidate (building
   its extensions into its own build directory) and waits. Under
   `gpu-slots run --late` both first only import torch (the reference also
   builds Model on the host and saves it for the candidate: reference.prepare),
   and go on once this process has taken the device (gpu_slots.timing_slot).
3. The candidate builds ModelNew as the reference built Model (while the
   reference computes its trials), then gets the secret seeds, one trial at
   a time; one trial, chosen at random, runs with the extension's results
   perturbed. The reference's worker compares the outputs: handed over in a
   device buffer it lent, described when a mismatch needs no values, or
   saved to files (untrusted/devicehandoff.py).
   Correct on the task's shape, it is then run on the shape variants
   (kernelsweep.core.shapes: the task's size constants rescaled), one call each
   in the same workers; wrong or failing on one is `wrong_on_variant`.
4. A correct candidate is timed against the reference: each times its own
   side in its own process, in alternating blocks of calls, on the same
   secret timing inputs (fresh for every call); the candidate is frozen
   while the reference runs.
   After each candidate block the parent picks, at random, which outputs to
   check against the reference. The speedup, its interval and the verdict
   come from kernelsweep.core.metrics.compare_timings.
Each duty is a module of judge/ (correctness, variants, timing, evidence);
the category comes from judge/verdict.py, a pure function of the evidence
they gather, and from classify for a candidate's worker that failed. This
class runs the duties in order: it owns the workers, the device turn, the
provenance and the record."""

from __future__ import annotations

import os
import random
import shutil
import socket
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kernelsweep.core import fileio, shapes
from kernelsweep.runtime import gpu_slots
from kernelsweep.evaluator import cheats, classify, confine, devices, messages, record, sandbox, settings, source
from kernelsweep.evaluator.errors import HarnessError
from kernelsweep.evaluator.judge import correctness, draws, evidence, timing, variants, verdict
from kernelsweep.evaluator.sandbox import Worker, child_env

_WORKERS = "kernelsweep.evaluator.untrusted."


def _read_text(path: Path, what: str) -> tuple[str | None, bytes]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        return None, data


def _disk_note(worker: Worker) -> str:
    """Saving outputs is the reference's only disk use: name a full disk, the
    usual cause of its failing with a torch.save error ("unexpected pos")."""
    try:
        free = shutil.disk_usage(worker.cwd).free
    except OSError:
        return ""
    full = free < correctness.DISK_MARGIN
    return f" (the disk of {worker.cwd} is full: {free / 2**20:.0f} MiB free)" if full else ""


class Evaluation:
    """One evaluation's state (flags, record, stage times, secret draws) and
    its conversation with the two workers; the duties (judge/) read and add
    to it through the methods without a leading underscore."""

    def __init__(self, reference: Path, candidate: Path, cfg: settings.EvalSettings, build_dir: Path,
                 log_dir: Path | None, task_sha256: str | None):
        self.reference = reference.resolve()
        self.candidate = candidate.resolve()
        self.cfg = cfg
        self.build_root = build_dir.resolve()
        self.log_dir = log_dir
        self.t0 = time.monotonic()
        self.flags: list[str] = []
        self.stage_s: dict[str, float] = {}
        self.device_info: dict[str, Any] = {}
        self.rng = random.SystemRandom()
        ref_text, _ = _read_text(self.reference, "reference")
        if ref_text is None:
            raise HarnessError(f"reference {self.reference} is not UTF-8 text")
        self.reference_sha = fileio.sha256_text(ref_text)
        self.task_sha = task_sha256 or self.reference_sha
        self.reference_file_sha = fileio.sha256_file(self.reference)
        cand_text, cand_bytes = _read_text(self.candidate, "candidate")
        self.src = source.analyze_bytes(cand_text, cand_bytes)
        self.cuda_arch = devices.resolve_cuda_arch(cfg.cuda_arch) if cfg.device == "cuda" else None
        self.confinement = None
        self.seeds = {"init": settings.INIT_SEED, "trials": [], "timing": []}
        self.variants = shapes.variants(ref_text, cfg.shape_variants)
        self.trial_signals: list[dict[str, Any]] = []
        self.record = record.blank(cfg, self.src)
        self.atol = cfg.atol
        self.allowances: list[float] | None = None  # the rounding allowance per output leaf (task shape)
        self.output_handoff: str | None = None  # how the trials' outputs crossed: "device" or "files (why)"
        self.without_device = False  # judged on its failed host-side preparation, the device never taken
        self.timing_cpu: int | None = None  # the CPU both workers time on (the CPU target; judge/timing.py)

    def finish(self, category: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
        cheats.check_known(self.flags)
        return record.finish(self.record, category, error, flags=self.flags, stage_s=self.stage_s,
                             device=self.cfg.device, wall_s=time.monotonic() - self.t0,
                             provenance=self._provenance())

    def _provenance(self) -> dict[str, Any]:
        info = self.device_info
        cfg = self.cfg
        return {
            "task_sha256": self.task_sha, "reference_sha256": self.reference_sha,
            "candidate_sha256": self.src.sha256,
            "device_name": info.get("device_name"), "capability": info.get("capability"),
            "driver": info.get("driver"), "torch": info.get("torch"), "cuda": info.get("cuda"),
            "python": info.get("python"),
            "seeds": self.seeds, "tolerance": cfg.tolerance, "atol": self.atol, "rtol": cfg.rtol,
            "trials": cfg.trials,
            "timing_trials": cfg.timing_trials, "warmup": cfg.warmup, "timeout_s": cfg.timeout_s,
            "compile_timeout_s": cfg.compile_timeout_s, "speedup_bound": cfg.speedup_bound,
            "equivalence_margin": cfg.equivalence_margin, "cuda_arch": self.cuda_arch,
            "harness": settings.HARNESS_VERSION, "confinement": self.confinement,
            "build_sharing": cfg.build_sharing, "shape_variants": cfg.shape_variants,
            "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "output_handoff": self.output_handoff,
        }

    def _worker(self, name: str, config: dict[str, Any], work: Path, *, confined: bool) -> Worker:
        fd = config.get("handoff_fd")
        overrides = devices.worker_env(str(self.cand_build), cuda_arch=self.cuda_arch) if confined else {}
        env = child_env(overrides)
        if self.cfg.device == "cpu":
            env["CUDA_VISIBLE_DEVICES"] = ""
            env["OMP_NUM_THREADS"] = "1"
        spec = None
        if confined and self.confinement == confine.NAMESPACES:
            spec = confine.worker_spec(
                private=work / name, readable=[self.candidate, self.reference, work / "shared"],
                writable=[self.cand_build], hide=[work, self.build_root, self.candidate.parent],
                memory_limit=self.memory_limit)
        return Worker(_WORKERS + name, config, log_path=self.logs / f"{name}.log", cwd=work / name,
                      run_limit_s=self.cfg.timeout_s, build_limit_s=self.cfg.compile_timeout_s, env=env,
                      label=name, confinement=spec, pass_fds=() if fd is None else (fd,),
                      replies=messages.CANDIDATE_REPLIES if confined else messages.REFERENCE_REPLIES)

    @contextmanager
    def spent(self, stage: str) -> Iterator[None]:
        """Add the block's seconds to stage_s[stage] (the timing stage's parts,
        so a slow timing says where its time went)."""
        t = time.monotonic()
        try:
            yield
        finally:
            self.stage_s[stage] = self.stage_s.get(stage, 0.0) + time.monotonic() - t

    def add_seconds(self, stage: str, reply: dict[str, Any], parts: tuple[str, ...]) -> None:
        """A worker's own account of where a stage's time went, added to
        stage_s as {stage}_{part}: diagnostics, never part of a verdict. From
        the candidate's worker only the named parts, as bounded numbers."""
        seconds = reply.get("seconds")
        for part in parts if isinstance(seconds, dict) else ():
            value = seconds.get(part)
            if type(value) in (int, float) and 0 <= value < 1e6:
                key = f"{stage}_{part}"
                self.stage_s[key] = self.stage_s.get(key, 0.0) + value

    def note_outcome(self, outcome: sandbox.Outcome, *, candidate: bool) -> None:
        if outcome.violations or outcome.results > 1:
            self.flags.append("report_tampered")
        if outcome.strays_killed and "stray_processes" not in self.flags:
            self.flags.append("stray_processes")
        if outcome.confinement_failed:
            raise HarnessError(confine.failure_message(outcome.log_excerpt[-2000:]), log=outcome.log)
        if candidate:
            # A worker that ended early sent no setup reply: its build events tell the builds.
            self.note_builds({"builds": [e for e in outcome.events if e.get("kind") == "build_end"],
                               "compile_s": outcome.build_s})
            if outcome.interrupted_build:
                sandbox.remove_stale_lock(outcome.interrupted_build)
                self.record["compiled"] = False

    def note_builds(self, payload: dict[str, Any]) -> None:
        """The builds the candidate made so far (from its setup reply, its build events, or its
        final report: all of them, those of the construction and the calls too)."""
        builds = [{k: b.get(k) for k in ("name", "ok", "seconds", "cached", "in_hold") + (("key",) if "key" in b else ())}
                  | ({"error": b["error"][:settings.BUILD_ERROR_CHARS]} if isinstance(b.get("error"), str) else {})
                  for b in payload.get("builds") or []]
        if builds:
            self.record["builds"] = builds
            self.record["compiled"] = all(b["ok"] for b in builds)
            # Compiler time spent while this evaluation held the device (a build the
            # compile step could not do ahead): zero when everything was cached.
            self.record["build_in_hold_s"] = round(sum(b["seconds"] or 0.0 for b in builds
                                                       if b.get("in_hold") and not b.get("cached")), 3)
        self.record["compile_s"] = round(payload.get("compile_s") or 0.0, 3)

    def candidate_failure(self, outcome: sandbox.Outcome, payload: dict | None,
                          variant: dict[str, Any] | None = None) -> dict[str, Any]:
        """The candidate worker stopped, failed or timed out."""
        if payload is not None and payload.get("status") in ("error", "interface_error"):
            outcome.result = payload
        failure = classify.classify_outcome(outcome)
        if failure is None:
            failure = classify.Failure("runtime_error", "NoResult", "the candidate's worker ended without a result")
        if failure.category == "harness":
            raise HarnessError(f"the build toolchain is not usable: {failure.message}", log=outcome.log)
        phase = failure.details.get("phase") or "start"
        if phase in ("start", "device") and failure.category != "timeout":
            # Before the candidate's code, or the harness setting the device up before that code used it.
            what = "set up the device" if phase == "device" else "start"
            raise HarnessError(f"the candidate's worker could not {what}: {failure.message}", log=outcome.log)
        if failure.category in ("hallucinated_api", "compile_error") and failure.type in ("BuildError", "LoadError"):
            self.record["compiled"] = False
        # Judged without the device, the candidate never had it (its gate stayed shut): nothing to probe.
        if failure.category in ("crash", "out_of_memory", "timeout") and self.cfg.device == "cuda" \
                and not self.without_device:
            problem = devices.device_unusable()
            if problem:  # the GPU, not the candidate: no verdict, the job fails and a rerun retries
                raise HarnessError(f"the GPU is unusable after this evaluation ({problem}); "
                                   f"the candidate's {failure.category} is not recorded", log=outcome.log)
        if variant is not None and "report_tampered" not in self.flags:
            return variants.failed(self, variant, failure.category, failure.type, failure.message,
                                   failure.error(outcome.log))
        return self.finish(failure.category, failure.error(outcome.log))

    def run(self) -> dict[str, Any]:
        src = self.src
        if src.no_code or src.syntax_error or not src.names_model_new:
            return self.finish(*source.static_verdict(src))
        self.confinement = confine.mechanism()
        self.memory_limit = settings.cpu_memory_limit(self.cfg.cpu_memory_limit_bytes) \
            if self.cfg.device == "cpu" else None
        self.cand_build = settings.candidate_build_dir(self.build_root, src.sha256, self.cfg.build_sharing)
        self.cand_build.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="kernelsweep-eval-") as tmp:
            work = Path(tmp)
            self.logs = Path(self.log_dir) if self.log_dir else work / "logs"
            self.logs.mkdir(parents=True, exist_ok=True)
            for name in ("reference", "candidate", "shared"):
                (work / name).mkdir()
            verdict = self._run_workers(work)
        record.stamp_stages(verdict, self.stage_s, self.cfg.device)
        return verdict

    def _run_workers(self, work: Path) -> dict[str, Any]:
        cfg = self.cfg
        self.seeds["trials"] = [draws.secret_seed() for _ in range(cfg.trials + 1)]  # one more: the perturbed call
        for v in self.variants:
            v["seed"] = draws.secret_seed()
        self.seeds["variants"] = [v["seed"] for v in self.variants]
        late = gpu_slots.late_claim()
        common = {"device": cfg.device, "precision": cfg.precision, "reference": str(self.reference),
                  "shared_dir": str(work / "shared"), "init_seed": settings.INIT_SEED,
                  "memory_limit": self.memory_limit, "await_go": late}
        # A socket pair for the reference's device buffer (untrusted/devicehandoff.py).
        pair = socket.socketpair() if cfg.device == "cuda" else None
        fds = {"reference": pair[0].fileno(), "candidate": pair[1].fileno()} if pair else {}
        ref = self._worker("reference", dict(common, private_dir=str(work / "reference"),
                                             candidate_dir=str(work / "candidate"),
                                             trial_seeds=self.seeds["trials"], atol=cfg.atol, rtol=cfg.rtol,
                                             rounding=cfg.profile.scaled,
                                             variants=self.variants,
                                             variant_bytes=settings.VARIANT_BYTES[cfg.device],
                                             handoff_fd=fds.get("reference")),
                           work, confined=False)
        cand = self._worker("candidate", dict(
            common, private_dir=str(work / "candidate"), candidate=str(self.candidate),
            build_root=str(self.cand_build), cuda_arch=self.cuda_arch,
            candidate_names=sorted(self.src.defined_names),
            # Names and sizes, not seeds: the variants' models are built before the device is held.
            variants=[{"name": v["name"], "constants": v["constants"]} for v in self.variants],
            kernel_names=source.kernel_names(self.src.evidence, cfg.device),
            profiled=source.profiled(self.src.evidence, cfg.device),
            op_namespaces=self.src.evidence.get("op_namespaces", []), handoff_fd=fds.get("candidate")),
            work, confined=True)
        started = time.monotonic()
        try:
            ref.start()
            cand.start()
        finally:
            for end in pair or ():
                end.close()  # each worker has its own end now
        with self._device_turn(work, ref, cand):
            try:
                return self._duties(work, ref, cand, time.monotonic() if late else started)
            finally:
                for w in (ref, cand):
                    w.thaw()
                    w.finish()
                for w, is_cand in ((ref, False), (cand, True)):
                    outcome = w.wait()
                    self.stage_s[w.label] = round(outcome.wall_s, 3)
                    if is_cand and self.record.get("category") is not None:
                        # Channel misuse found after the verdict still turns it into a cheat.
                        if (outcome.violations or outcome.results > 1) and self.record["category"] != "cheat":
                            self.flags.append("report_tampered")
                            self.finish("cheat", verdict.cheat_error(self.flags, outcome.log))

    @contextmanager
    def _device_turn(self, work: Path, ref: Worker, cand: Worker) -> Iterator[None]:
        """Under `gpu-slots run --late`: both workers prepare on the host while
        the job before this one still times (the reference builds Model; the
        candidate is imported and, once the reference's init inputs are saved,
        builds ModelNew); the device is taken once both are warm and held until
        they have exited. A candidate that failed on the host needs no device:
        its failure is the verdict. Elsewhere the wrapper already holds the
        slot: nothing to wait for."""
        if not gpu_slots.late_claim():
            yield
            return
        warming = time.monotonic()
        try:
            ref.hello()  # False when it ended first: its failure shows at its reply to setup
            fileio.write_atomic(work / "shared" / settings.REFERENCE_PREPARED, str(ref.prepared))
            failed = not cand.hello() or cand.prepared == "failed"
        except BaseException:
            for w in (ref, cand):
                w.abort()
            raise
        if failed:
            self.stage_s.update(warm=round(time.monotonic() - warming, 3), slot_wait=0.0, device_held=0.0)
            self.without_device = True
            ref.abort()  # not needed: the candidate's failure is the verdict
            cand.send("report")  # its failure comes back as its reply to setup; its gate stays shut
            yield
            return
        with gpu_slots.accounted_turn(f"evaluate {self.candidate}", self.stage_s, warming):
            for w in (ref, cand):
                w.send("go")
            yield

    def reference_ready(self, ref: Worker) -> dict[str, Any]:
        ready = ref.reply(0)
        if not ready or ready.get("status") != "ok":
            ref.abort()
            outcome = ref.wait()
            failure = classify.classify_outcome(outcome) if ready is None else None
            message = (failure.message if failure else (ready or {}).get("message")
                       or ((ready or {}).get("error") or {}).get("message") or "no result")
            raise HarnessError(f"the reference failed: {message}{_disk_note(ref)}", log=outcome.log)
        self.device_info = ready.get("device_info", {})
        return ready

    def candidate_stopped(self, cand: Worker, payload: dict | None,
                          variant: dict[str, Any] | None = None) -> dict[str, Any]:
        if payload is None or payload.get("status") == "ok":
            cand.abort()
        outcome = cand.wait()
        self.note_outcome(outcome, candidate=True)
        return self.candidate_failure(outcome, payload, variant)

    def log_path(self) -> str | None:
        """The candidate worker's log, when the caller keeps logs."""
        return str(Path(self.log_dir) / "candidate.log") if self.log_dir else None

    def _duties(self, work: Path, ref: Worker, cand: Worker, started: float) -> dict[str, Any]:
        """Correctness, shape variants, timing: each decides, or hands on to the next."""
        decided, manifest = correctness.check(self, work, ref, cand, started)
        if decided is not None:
            return decided
        decided = variants.check(self, ref, cand)
        if decided is not None:
            return decided
        timed = timing.run(self, ref, cand, manifest)
        if isinstance(timed, dict):
            return timed
        return self._timed_verdict(manifest, timed)

    def _timed_verdict(self, manifest: dict[str, Any], timed: timing.Timed) -> dict[str, Any]:
        """The timing's evidence gathered (patches, builds, the reference's
        file, speed, kernels) and judged by verdict.timed_verdict."""
        cfg, report = self.cfg, timed.report
        comparison = timing.record(self, timed)
        evidence.note_patches(self, report)
        if report.get("builds"):
            self.note_builds(report)  # with the builds ModelNew made after the import (in __init__, forward)
        if fileio.sha256_file(self.reference) != self.reference_file_sha:
            self.flags.append("reference_modified")
        peak = self.device_info.get("peak_bytes_per_s") or settings.FALLBACK_PEAK_BYTES_PER_S[cfg.device]
        if evidence.implausibly_fast(timed.cand_ms, comparison["speedup"], manifest["trials"][0]["output_bytes"],
                                     speedup_bound=cfg.speedup_bound, peak_bytes_per_s=peak):
            self.flags.append("excessive_speedup")
        launched = evidence.note_kernel(self, report)
        found = verdict.TimedEvidence(
            device=cfg.device, flags=tuple(self.flags), defines_kernel=source.defines_kernel(self.src.evidence, cfg.device),
            launched=launched, timing_verdict=comparison["verdict"], speedup_ci=comparison["speedup_ci"],
            log=self.log_path(), failed_builds=tuple(str(b.get("name")) + (f" ({b['error']})" if b.get("error") else "")
                                                     for b in self.record.get("builds") or [] if not b.get("ok")),
            share=self.record["kernel_evidence"].get("share"))
        self.record["custom_kernel"] = verdict.is_custom_kernel(found)
        category, error = verdict.timed_verdict(found)
        if category == "cheat":
            self.record["faster"] = False
        elif verdict.is_unstable(found):
            self.flags.append("timing_unstable")
            self.record["faster"] = None
            self.record["timing_verdict"] = "unstable"
        return self.finish(category, error)

    @staticmethod
    def reference_ok(ref: Worker, reply: dict | None, doing: str) -> None:
        """A failed reference reply is the harness's (the confined candidate
        cannot reach that process): no verdict, with the reference's log."""
        if reply and reply.get("status") == "ok":
            return
        if reply is None:
            ref.abort()
            outcome = ref.wait()
            if outcome.violations:  # alive, but its reply (or another line) broke messages.REFERENCE_REPLIES
                raise HarnessError(f"the reference's worker broke the protocol while {doing} "
                                   f"({outcome.violations} message(s) not as declared in messages.py); "
                                   f"its log ends: {outcome.log_excerpt[-600:]}", log=outcome.log)
            failure = classify.classify_outcome(outcome) or classify.classify_exit(outcome)
            why = f"{failure.category}: {failure.message}" if failure else "no reply"
            raise HarnessError(f"the reference's worker died while {doing} ({why}){_disk_note(ref)}; "
                               f"its log ends: {outcome.log_excerpt[-600:]}", log=outcome.log)
        raise HarnessError(f"the reference failed while {doing}: "
                           f"{(reply.get('error') or {}).get('message') or reply.get('message')}{_disk_note(ref)}")


def evaluate(reference: Path, candidate: Path, *, build_dir: Path | None = None, log_dir: Path | None = None,
             task_sha256: str | None = None, **options: Any) -> dict[str, Any]:
    """Evaluate CANDIDATE (defines ModelNew) against REFERENCE (KernelBench
    module). `options` are the fields of settings.EvalSettings (its defaults
    are the only defaults). Returns the eval record (docs/results.md).
    Raises HarnessError only when the evaluation itself cannot run."""
    try:
        cfg = settings.EvalSettings(**options)
    except (TypeError, ValueError) as exc:
        raise HarnessError(str(exc)) from None
    build = Path(build_dir) if build_dir else settings.default_build_dir()
    return Evaluation(Path(reference), Path(candidate), cfg, build, log_dir, task_sha256).run()
