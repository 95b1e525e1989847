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
   saved to files (workers/devicehandoff.py).
   Correct on the task's shape, it is then run on the shape variants
   (kernelsweep.shapes: the task's size constants rescaled), one call each
   in the same workers; wrong or failing on one is `wrong_on_variant`.
4. A correct candidate is timed against the reference: each times its own
   side in its own process, in alternating blocks of calls, on the same
   secret timing inputs (fresh for every call); the candidate is frozen
   while the reference runs.
   After each candidate block the parent picks, at random, which outputs to
   check against the reference. The speedup, its interval and the verdict
   come from kernelsweep.metrics.compare_timings.
The category is chosen here, from the flags of cheats.FLAGS and the
failures of classify."""

from __future__ import annotations

import math
import os
import random
import secrets
import shutil
import socket
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from kernelsweep import fileio, gpu_slots, metrics, shapes
from kernelsweep.evaluator import cheats, classify, confine, devices, record, sandbox, settings, source, trusted_clock
from kernelsweep.evaluator.errors import HarnessError
from kernelsweep.evaluator.sandbox import Worker, child_env

_WORKERS = "kernelsweep.evaluator.workers."
BLOCK_CALLS = {"cuda": 10, "cpu": 2}  # timed calls per block: on a shared CPU, finer interleaving
# Timed calls whose outputs are compared with the reference's, drawn in secret
# among all timed calls (the armed call comes on top). Each check moves an
# output per side and compares it, with the device held; checking outputs of
# hundreds of MiB whole would cost more than the timing itself, so big outputs
# are checked on sampled elements (trees.SAMPLED_ELEMENTS, a few MiB per call;
# docs/decisions/2026-12-02-timed-output-checks.md).
# A candidate wrong in half of its timed calls escapes with p = 2 ** -12.
CHECKED_CALLS = 12
SENTINEL_CALLS = 5         # candidate calls timed with a full synchronize, to find hidden work
HIDDEN_WORK_RATIO = 1.5    # sentinel median over event median beyond which work escapes the end event
HIDDEN_WORK_MIN_MS = 0.02
SLOWED_RATIO = {"cuda": 1.3, "cpu": 2.0}  # reference beside the candidate over alone: a cheat beyond
BLAME_CALLS = 10           # reference calls timed on each side of ending the candidate, to blame a slowdown

UNSTABLE_WIDTH = 2.0       # speedup interval hi/lo beyond which a CPU timing gives no verdict...
CLEAR_RATIO = 1.5          # ...unless the whole interval lies beyond 1.5x either way


def slower(ms: list[float], than: list[float], ratio: float) -> bool:
    """Timings `ms` slower than `than` by more than `ratio` (and 10 µs)."""
    return metrics.median(ms) > ratio * metrics.median(than) + 0.01


def block_calls(device: str, input_bytes: int, output_bytes: int) -> int:
    """Timed calls per block: as many as BLOCK_CALLS, within the device's
    timing budget (settings.TIMING_POOL_BYTES). A block's inputs are made
    before its calls, and the candidate keeps a clone of every output until
    the block ends (the calls to check are drawn after it), so both count:
    sized by inputs alone, a task with small inputs and GiB-sized outputs
    would put an honest candidate out of device memory
    (docs/decisions/2026-12-02-timing-blocks.md)."""
    per_call = max(1, input_bytes + output_bytes)
    return max(1, min(BLOCK_CALLS[device], settings.TIMING_POOL_BYTES[device] // per_call))


def slowdown_is_the_candidates(beside: list[float], after: list[float], alone: list[float], ratio: float) -> bool:
    """The reference, timed beside the candidate and right after it ended:
    slow beside it, and fast again once it is gone. Both blocks are adjacent in
    time, so load from elsewhere affects them alike."""
    return slower(beside, alone, ratio) and slower(beside, after, ratio) and not slower(after, alone, ratio)


def _read_text(path: Path, what: str) -> tuple[str | None, bytes]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise HarnessError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8"), data
    except UnicodeDecodeError:
        return None, data


DISK_MARGIN = 1 << 30  # room kept free beyond the outputs' own size


def _disk_note(worker: Worker) -> str:
    """Saving outputs is the reference's only disk use: name a full disk, the
    usual cause of its failing with a torch.save error ("unexpected pos")."""
    try:
        free = shutil.disk_usage(worker.cwd).free
    except OSError:
        return ""
    return f" (the disk of {worker.cwd} is full: {free / 2**20:.0f} MiB free)" if free < DISK_MARGIN else ""


def _work_share(trials: list[dict[str, Any]]) -> float | None:
    """The share of a call's CPU time spent inside the candidate's extension
    calls (0-1; workers/candidate._call_checked): the median over the measured
    trials, from bounded numbers, so that one call's one-time work (a lazy build
    or library load, a first-call cache) does not decide it, nor does one call
    with the kernel among calls without. None when no call was measured."""
    shares = []
    for t in trials:
        cpu = t.get("cpu_ms")
        if isinstance(cpu, dict) and all(type(cpu.get(k)) in (int, float) and math.isfinite(cpu[k]) and cpu[k] >= 0
                                         for k in ("inside", "call")) and cpu["call"] > 0:
            shares.append(min(1.0, cpu["inside"] / cpu["call"]))
    if not shares:
        return None
    return round(statistics.median(shares), 4)


def _secret_seed() -> int:
    return secrets.randbelow(2**31 - 1) + 1


class Evaluation:
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

    # ------------------------------------------------------------ record ---
    def _finish(self, category: str, error: dict[str, Any] | None = None) -> dict[str, Any]:
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

    # ----------------------------------------------------------- workers ---
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
                      label=name, confinement=spec, pass_fds=() if fd is None else (fd,))

    @contextmanager
    def _spent(self, stage: str) -> Iterator[None]:
        """Add the block's seconds to stage_s[stage] (the timing stage's parts,
        so a slow timing says where its time went)."""
        t = time.monotonic()
        try:
            yield
        finally:
            self.stage_s[stage] = self.stage_s.get(stage, 0.0) + time.monotonic() - t

    def _add_seconds(self, stage: str, reply: dict[str, Any], parts: tuple[str, ...]) -> None:
        """A worker's own account of where a stage's time went, added to
        stage_s as {stage}_{part}: diagnostics, never part of a verdict. From
        the candidate's worker only the named parts, as bounded numbers."""
        seconds = reply.get("seconds")
        for part in parts if isinstance(seconds, dict) else ():
            value = seconds.get(part)
            if type(value) in (int, float) and 0 <= value < 1e6:
                key = f"{stage}_{part}"
                self.stage_s[key] = self.stage_s.get(key, 0.0) + value

    def _note_outcome(self, outcome: sandbox.Outcome, *, candidate: bool) -> None:
        if outcome.violations or outcome.results > 1:
            self.flags.append("report_tampered")
        if outcome.strays_killed and "stray_processes" not in self.flags:
            self.flags.append("stray_processes")
        if outcome.confinement_failed:
            raise HarnessError(confine.failure_message(outcome.log_excerpt[-2000:]), log=outcome.log)
        if candidate:
            # A worker that ended early sent no setup reply: its build events tell the builds.
            self._note_builds({"builds": [e for e in outcome.events if e.get("kind") == "build_end"],
                               "compile_s": outcome.build_s})
            if outcome.interrupted_build:
                sandbox.remove_stale_lock(outcome.interrupted_build)
                self.record["compiled"] = False

    def _note_builds(self, payload: dict[str, Any]) -> None:
        """The builds the candidate made so far (from its setup reply, its build events, or its
        final report: all of them, those of the construction and the calls too)."""
        builds = [{k: b.get(k) for k in ("name", "ok", "seconds", "cached", "in_hold") + (("key",) if "key" in b else ())}
                  for b in payload.get("builds") or []]
        if builds:
            self.record["builds"] = builds
            self.record["compiled"] = all(b["ok"] for b in builds)
            # Compiler time spent while this evaluation held the device (a build the
            # compile step could not do ahead): zero when everything was cached.
            self.record["build_in_hold_s"] = round(sum(b["seconds"] or 0.0 for b in builds
                                                       if b.get("in_hold") and not b.get("cached")), 3)
        self.record["compile_s"] = round(payload.get("compile_s") or 0.0, 3)

    def _candidate_failure(self, outcome: sandbox.Outcome, payload: dict | None,
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
            return self._variant_failed(variant, failure.category, failure.type, failure.message,
                                        failure.error(outcome.log))
        return self._finish(failure.category, failure.error(outcome.log))

    # --------------------------------------------------------------- run ---
    def run(self) -> dict[str, Any]:
        src = self.src
        if src.no_code or src.syntax_error or not src.names_model_new:
            return self._finish(*source.static_verdict(src))
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
        self.seeds["trials"] = [_secret_seed() for _ in range(cfg.trials + 1)]  # one more: the perturbed call
        for v in self.variants:
            v["seed"] = _secret_seed()
        self.seeds["variants"] = [v["seed"] for v in self.variants]
        late = gpu_slots.late_claim()
        common = {"device": cfg.device, "precision": cfg.precision, "reference": str(self.reference),
                  "shared_dir": str(work / "shared"), "init_seed": settings.INIT_SEED,
                  "memory_limit": self.memory_limit, "await_go": late}
        # A socket pair for the reference's device buffer (workers/devicehandoff.py).
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
            kernel_names=source.kernel_names(self.src.evidence, cfg.device),
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
                return self._correctness(work, ref, cand, time.monotonic() if late else started)
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
                            self._finish("cheat", self._cheat_error(outcome.log))

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

    def _reference_ready(self, ref: Worker) -> dict[str, Any]:
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

    @staticmethod
    def _room_for_outputs(work: Path, manifest: dict[str, Any]) -> None:
        """The candidate saves its outputs of the trials and probes as the
        reference did: a disk without room for them would fail the candidate's
        worker, a harness fault blamed on the candidate. Stop before that."""
        need = sum(case["output_bytes"] for case in manifest["trials"] + manifest["probes"])
        free = shutil.disk_usage(work).free
        if free < need + DISK_MARGIN:
            raise HarnessError(f"no room for the candidate's outputs: the trials' outputs need "
                               f"{need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB is free on the disk of {work} "
                               f"(set TMPDIR to a larger disk, or fewer trials)")

    def _correctness(self, work: Path, ref: Worker, cand: Worker, started: float) -> dict[str, Any]:
        cand_ready = cand.reply(0)
        if not cand_ready or cand_ready.get("status") != "ok":
            ref.abort()
            cand.abort()
            outcome = cand.wait()
            self._note_outcome(outcome, candidate=True)
            return self._candidate_failure(outcome, cand_ready)
        if self.without_device:  # its hello said it failed, its setup says it did not: not its own hello
            self.flags.append("report_tampered")
            return self._finish("cheat", self._cheat_error(self._log_path()))
        self._note_builds(cand_ready)
        # ModelNew is built while the reference runs its trials: once the reference's setup has
        # begun (its "device" phase), its init inputs are in the shared folder.
        construct = cand.send("construct") if ref.reached("device") else None
        manifest = self._reference_ready(ref)
        if manifest.get("crowded_out"):
            cand.abort()
            return self._finish("out_of_memory", {
                "type": "ReferenceCrowdedOut", "log": self._log_path(),
                "message": f"the reference ran out of device memory computing its trials while the candidate's "
                           f"process, building ModelNew, held {manifest['crowded_out'] / 2**30:.1f} GiB "
                           f"({manifest.get('message')})"})
        self._add_seconds("reference", manifest, ("trials", "keep"))
        self._room_for_outputs(work, manifest)
        if manifest["degenerate"]:
            self.flags.append("degenerate_tolerance")
            self.atol = manifest["atol"]  # compare.distinguishing_tolerance of the reference's outputs
        self._note_rounding(manifest)
        with self._spent("construct"):  # what of ModelNew's construction outlasted the reference's trials
            step = cand.reply(construct if construct is not None else cand.send("construct"))
        if not step or step.get("status") != "ok":
            return self._candidate_stopped(cand, step)
        self.record["weights"] = record.weights_kept(manifest["weights"], step.get("weights"))
        armed = self.rng.randrange(len(manifest["trials"]))
        cases = [{"name": t["name"], "seed": t["seed"], "armed": i == armed}
                 for i, t in enumerate(manifest["trials"])]
        cases += [{"name": p["name"], "seed": p["seed"], "inputs": p["inputs"]} for p in manifest["probes"]]
        handoff = manifest.get("handoff")
        self.output_handoff = "device" if handoff else f"files ({manifest['handoff_off']})" \
            if manifest.get("handoff_off") else "files"
        for case in cases:
            case["slots"] = (manifest.get("output_slots") or {}).get(case["name"])
        step = cand.request("trials", cases=cases, handoff={"bytes": handoff["bytes"]} if handoff else None)
        if not step or step.get("status") != "ok":
            return self._candidate_stopped(cand, step)
        self._add_seconds("trials", step, ("calls", "save"))
        if handoff and step.get("handoff_refused"):
            self.output_handoff = f"files (the candidate's worker: {str(step['handoff_refused'])[:200]})"
        self.stage_s["correctness"] = round(time.monotonic() - started, 3)
        early = cand.request("report", observe=False)
        if early and early.get("status") == "ok":
            self._note_patches(early)
        verdict = self._judge(ref, manifest, step["trials"], armed)
        if verdict is not None:
            return verdict
        verdict = self._check_variants(ref, cand)
        if verdict is not None:
            return verdict
        return self._time(work, ref, cand, manifest)

    def _note_rounding(self, manifest: dict[str, Any]) -> None:
        """The tolerance as judged: under a scaled profile, the reference's own
        rounding error per output (its float64 twin's measure) and the allowance it
        gives, or why there is none (the plain bound then applies)."""
        tolerance = self.record["tolerance"]
        tolerance["atol"] = self.atol
        if not self.cfg.profile.scaled:
            return
        rounding = manifest.get("rounding")
        if rounding is None:
            tolerance["fallback"] = manifest.get("rounding_off") or "no trial was computed in float64"
            return
        self.allowances = settings.rounding_allowances(rounding)
        tolerance.update(rounding=rounding, allowance=self.allowances)

    def _note_margin(self, cmp: dict[str, Any]) -> None:
        """The worst margin (|c - r| over its bound) among the comparisons that decide correctness."""
        margin = cmp.get("margin")
        if margin is not None:
            held = self.record["tolerance"]["margin"]
            self.record["tolerance"]["margin"] = margin if held is None else max(held, margin)

    # ---------------------------------------------------------- variants ---
    def _check_variants(self, ref: Worker, cand: Worker) -> dict[str, Any] | None:
        """The candidate, correct on the task's shape, on each shape variant the
        reference could run (the reference runs each just before): one call
        each, in the same worker. None when it is correct on all of them (it
        goes on to timing)."""
        if not self.variants:
            return None
        planned = {v["name"]: v for v in self.variants}
        summary = self.record["variants"] = {
            "task": shapes.size_constants(self.reference.read_text(encoding="utf-8")),
            "checked": [], "dropped": [], "failed": None}
        started = time.monotonic()
        try:
            for name, plan in planned.items():
                reply = ref.request("variant", name=name)
                self._reference_ok(ref, reply, f"running shape variant {name}")
                case = reply["variant"]
                if case.get("crowded_out"):  # not dropped: the candidate's memory kept the reference out
                    return self._variant_failed(
                        plan, "out_of_memory", "VariantCrowdedOut",
                        f"the reference could not run it beside the candidate, whose process held "
                        f"{case['crowded_out'] / 2**30:.1f} GiB of device memory ({case['dropped']})")
                if case.get("dropped"):
                    summary["dropped"].append({"name": name, "constants": plan["constants"],
                                               "reason": case["dropped"]})
                    continue
                if case.get("narrowed"):  # the reference could run only its batch rescaled
                    plan = dict(plan, constants=case["constants"])
                reply = cand.request("variant", name=name, constants=plan["constants"], seed=plan["seed"])
                if not reply or reply.get("status") != "ok":
                    return self._candidate_stopped(cand, reply, variant=plan)
                self._note_trial_signals(reply, case)
                allowances = settings.rounding_allowances(case.get("rounding"))
                cmp = self._compared(ref, [{"name": name, "file": f"{name}.pt"}], allowances)[0]
                if "unreadable" in cmp:
                    return self._variant_failed(plan, "runtime_error", "UnreadableOutput",
                                                f"its output cannot be read: {cmp['unreadable']}")
                self._note_margin(cmp)
                summary["checked"].append({"name": name, "constants": plan["constants"], "ok": cmp["ok"],
                                           "max_abs_diff": cmp["max_abs_diff"], "margin": cmp.get("margin"),
                                           **({"narrowed": case["narrowed"]} if case.get("narrowed") else {}),
                                           **({"rounding_off": case["rounding_off"]}
                                              if self.cfg.profile.scaled and case.get("rounding_off") else {})})
                if not cmp["ok"]:
                    how = "shape_mismatch" if cmp["kind"] in ("structure", "shape", "dtype") else "wrong_output"
                    return self._variant_failed(plan, how, "OutputMismatch", cmp["message"])
        finally:
            self.stage_s["variants"] = round(time.monotonic() - started, 3)
        if cheats.cheats_among(self.flags):
            return self._finish("cheat", self._cheat_error(self._log_path()))
        return None

    def _variant_failed(self, plan: dict[str, Any], how: str, kind: str, message: str,
                        error: dict[str, Any] | None = None) -> dict[str, Any]:
        """Correct on the task's shape, wrong or failing on this variant."""
        shown = ", ".join(f"{k}={v}" for k, v in plan["constants"].items())
        self.record["variants"]["failed"] = {"name": plan["name"], "constants": plan["constants"],
                                             "category": how, "message": message[:1000]}
        error = dict(error or {"log": self._log_path()}, type=kind, variant=plan["name"], failure=how,
                     constants=plan["constants"],
                     message=f"correct on the task's shape, but on variant {plan['name']} ({shown}): "
                             f"{how}: {message}")
        return self._finish("wrong_on_variant", error)

    def _candidate_stopped(self, cand: Worker, payload: dict | None,
                           variant: dict[str, Any] | None = None) -> dict[str, Any]:
        if payload is None or payload.get("status") == "ok":
            cand.abort()
        outcome = cand.wait()
        self._note_outcome(outcome, candidate=True)
        return self._candidate_failure(outcome, payload, variant)

    def _compared(self, ref: Worker, cases: list[dict[str, Any]],
                  allowances: list[float] | None | str = "task") -> list[dict[str, Any]]:
        """The candidate's saved outputs compared with the reference's, in the
        reference's worker on its device (workers/reference.judge): one result
        per case, compare.compare_outputs's or {ok: False, unreadable: why}.
        File names are the parent's, never taken from a candidate's reply.
        allowances: the rounding allowance per output leaf ("task": the task shape's)."""
        allowances = self.allowances if allowances == "task" else allowances
        with self._spent("compare"):
            reply = ref.request("judge", cases=cases, atol=self.atol, rtol=self.cfg.rtol, allowances=allowances)
        self._reference_ok(ref, reply, "comparing outputs")
        self._add_seconds("compare", reply, ("load", "values", "on_host"))
        return reply["results"]

    def _judge(self, ref: Worker, manifest: dict[str, Any], trials: list[dict[str, Any]],
               armed: int) -> dict[str, Any] | None:
        """Compare every trial; None when the candidate goes on to timing."""
        if fileio.sha256_file(self.reference) != self.reference_file_sha:
            self.flags.append("reference_modified")
        by_name = {t["name"]: t for t in trials}
        self.trial_signals = trials
        extension_used = any(t.get("extension_calls") for t in trials)
        for i, case in enumerate(manifest["trials"]):
            if case["name"] not in by_name:
                return self._finish("runtime_error", {"type": "MissingOutput", "log": self._log_path(),
                                                      "message": f"no output for trial {i}"})
        perturbed_at = armed if by_name[manifest["trials"][armed]["name"]].get("perturbed_calls") else None
        # Constant-output check: the outputs of the trials (the perturbed call's aside) and probes.
        constant = bool(manifest.get("constant"))
        cases = [{"name": t["name"], "file": f"{t['name']}.pt", "grouped": constant and i != perturbed_at}
                 for i, t in enumerate(manifest["trials"])]
        cases += [{"name": p["name"], "file": f"{p['name']}.pt", "grouped": True}
                  for p in manifest["probes"] if p["name"] in by_name] if constant else []
        for case in cases:  # an output handed over in the reference's buffer, or described (devicehandoff.py)
            for way in ("handed", "described"):
                if by_name[case["name"]].get(way) is not None:
                    case[way] = by_name[case["name"]][way]
        results = self._compared(ref, cases)
        max_abs, max_rel, passed, mismatch = 0.0, 0.0, 0, None
        perturbed = None
        for i, case in enumerate(manifest["trials"]):
            cmp = results[i]
            if cmp.get("tampered"):
                self.flags.append("output_file_tampered")
                return self._finish("cheat", self._cheat_error(self._log_path()))
            if "unreadable" in cmp:
                return self._finish("runtime_error", {"type": "UnreadableOutput", "log": self._log_path(),
                                                      "message": f"trial {i} output cannot be read: "
                                                                 f"{cmp['unreadable']}"})
            self._note_trial_signals(by_name[case["name"]], case)
            if i == perturbed_at:
                perturbed = cmp  # judged for dependence, not correctness
                continue
            if i == armed and extension_used:
                self.flags.append("kernel_result_unused")  # that call never ran the extension
            if cmp["max_abs_diff"] is not None:
                max_abs, max_rel = max(max_abs, cmp["max_abs_diff"]), max(max_rel, cmp["max_rel_diff"])
            self._note_margin(cmp)
            if cmp["ok"]:
                passed += i != armed  # of the configured trials (the armed call is an extra one)
            elif mismatch is None:
                mismatch = (i, cmp)
        self.record["trials_passed"] = passed
        if mismatch is None or mismatch[1]["max_abs_diff"] is not None:
            self.record["max_abs_diff"], self.record["max_rel_diff"] = max_abs, max_rel
        if constant:
            self.flags.append("constant_reference")
            grouped = [r for r, c in zip(results, cases) if c["grouped"]]
            if len(grouped) > 1 and all(r.get("same_as_first") for r in grouped):
                self.flags.append("constant_output")
        if mismatch is not None and "output_changed_after_return" in self.flags:
            return self._finish("cheat", self._cheat_error(self._log_path()))  # work kept running past forward's return
        if mismatch is not None:
            i, cmp = mismatch
            category = "shape_mismatch" if cmp["kind"] in ("structure", "shape", "dtype") else "wrong_output"
            return self._finish(category, {"type": "OutputMismatch", "log": self._log_path(),
                                           "message": f"trial {i}: {cmp['message']}"})
        if perturbed is not None and perturbed["ok"]:
            self.flags.append("kernel_result_unused")
        if cheats.cheats_among(self.flags):
            return self._finish("cheat", self._cheat_error(self._log_path()))
        if constant:  # no variant or timing: neither can make a match on this task mean more
            return self._finish("indistinguishable", {
                "type": "ConstantReference", "log": self._log_path(),
                "message": "the outputs match, but the reference's do not depend on its inputs: a constant "
                           "answer would match as well, so this task cannot tell the candidate from one"})
        return None

    def _note_trial_signals(self, trial: dict[str, Any], case: dict[str, Any]) -> None:
        if trial["mutates_inputs"] and not case["mutates_inputs"]:
            self.flags.append("mutates_inputs")
        if trial["aliases_inputs"] and not case["aliases_inputs"]:
            self.flags.append("returns_input")
        if trial["reuses_output_storage"]:
            self.flags.append("reuses_output_storage")
        if trial["changed_after_return"]:
            self.flags.append("output_changed_after_return")
        if not trial["plain"]:
            self.flags.append("non_plain_output")
        if not trial.get("on_device", True):
            self.flags.append("output_not_on_device")
        self._note_hooks(trial)

    def _note_hooks(self, reply: dict[str, Any]) -> None:
        """Profile, trace or monitoring hooks were set while the harness's own
        code ran after a call (workers/hooks.py): candidate code inside it."""
        if reply.get("hooks") and "interpreter_hooks" not in self.flags:
            self.flags.append("interpreter_hooks")

    def _log_path(self) -> str | None:
        """The candidate worker's log, when the caller keeps logs."""
        return str(Path(self.log_dir) / "candidate.log") if self.log_dir else None

    def _cheat_error(self, log: str | None) -> dict[str, Any]:
        return {"type": "Cheat", "message": "detected: " + ", ".join(cheats.cheats_among(self.flags)), "log": log}

    # ------------------------------------------------------------ timing ---
    def _both(self, ref: Worker, cand: Worker, op: str, **args: Any) -> tuple[dict | None, dict | None]:
        a, b = ref.send(op, **args), cand.send(op, **args)
        return ref.reply(a), cand.reply(b)

    def _ref_block(self, ref: Worker, cand: Worker | None, seeds: list[int], synchronized: bool,
                   windows: list[trusted_clock.Block] | None = None) -> list[float]:
        """The reference's timed calls, the candidate frozen meanwhile; cand is
        None once the candidate has ended (nothing to freeze, and its pids may
        be reused by now). WINDOWS gets the block's window (trusted_clock.py)."""
        with self._spent("timing_reference"):
            if cand is not None:
                cand.freeze()
            try:
                sent = time.monotonic()
                reply = ref.request("block", seeds=seeds, synchronized=synchronized)
                window = time.monotonic() - sent
            finally:
                if cand is not None:
                    cand.thaw()
        self._reference_ok(ref, reply, "being timed" if cand is not None else "being timed again")
        if windows is not None:
            windows.append(trusted_clock.Block(window * 1e3, reply["ms"]))
        return reply["ms"]

    def _cand_block(self, cand: Worker, windows: list[trusted_clock.Block], **args: Any) -> dict | None:
        """The candidate's timed calls, its block's window kept (trusted_clock.py)."""
        with self._spent("timing_candidate"):
            sent = time.monotonic()
            reply = cand.request("block", **args)
            window = time.monotonic() - sent
        if reply and reply.get("status") == "ok" and isinstance(reply.get("ms"), list):
            windows.append(trusted_clock.Block(window * 1e3, reply["ms"]))
        return reply

    @staticmethod
    def _reference_ok(ref: Worker, reply: dict | None, doing: str) -> None:
        """A failed reference reply is the harness's (the confined candidate
        cannot reach that process): no verdict, with the reference's log."""
        if reply and reply.get("status") == "ok":
            return
        if reply is None:
            ref.abort()
            outcome = ref.wait()
            failure = classify.classify_outcome(outcome) or classify.classify_exit(outcome)
            why = f"{failure.category}: {failure.message}" if failure else "no reply"
            raise HarnessError(f"the reference's worker died while {doing} ({why}){_disk_note(ref)}; "
                               f"its log ends: {outcome.log_excerpt[-600:]}", log=outcome.log)
        raise HarnessError(f"the reference failed while {doing}: "
                           f"{(reply.get('error') or {}).get('message') or reply.get('message')}{_disk_note(ref)}")

    def _time(self, work: Path, ref: Worker, cand: Worker, manifest: dict[str, Any]) -> dict[str, Any]:
        cfg = self.cfg
        t_start = time.monotonic()
        # Every timed call gets inputs of its own secret seed, made just before
        # its block (no input is seen twice, so no answer can be remembered); a
        # block holds as many calls as their inputs and kept outputs fit (block_calls).
        seeds = [_secret_seed() for _ in range(cfg.timing_trials + cfg.warmup)]
        self.seeds["timing"] = seeds
        size = block_calls(cfg.device, manifest["input_bytes"], max(t["output_bytes"] for t in manifest["trials"]))
        self.record.setdefault("timing", {})["block_calls"] = size
        timed = seeds[cfg.warmup:]
        blocks = [timed[i:i + size] for i in range(0, len(timed), size)]
        # The candidate's clock flushes as many bytes as the reference's, sized in the reference's worker.
        step = cand.request("clock", flush_bytes=manifest["flush_bytes"])
        if not step or step.get("status") != "ok":
            return self._candidate_stopped(cand, step)
        for i in range(0, cfg.warmup, size):  # in blocks too: 10 sets of 8 GiB inputs at once do not fit
            with self._spent("timing_warmup"):
                r_warm, c_warm = self._both(ref, cand, "warmup", seeds=seeds[i:min(i + size, cfg.warmup)])
            if not c_warm or c_warm.get("status") != "ok":
                return self._candidate_stopped(cand, c_warm)
            self._reference_ok(ref, r_warm, "warming up")
        verify = not any(t["mutates_inputs"] for t in manifest["trials"])
        alone = self._ref_block(ref, cand, blocks[0], False)  # before the candidate ever ran a timed call
        ref_ms, cand_ms = [], []
        checked = set(self.rng.sample(range(len(timed)), min(len(timed), CHECKED_CALLS)))
        armed_block = self.rng.randrange(len(blocks))
        extension_used = any(t.get("extension_calls") for t in self.trial_signals)
        ref_windows: list[trusted_clock.Block] = []
        cand_windows: list[trusted_clock.Block] = []
        for b, block in enumerate(blocks):
            ref_ms += self._ref_block(ref, cand, block, False, ref_windows)
            armed_at = self.rng.randrange(len(block)) if b == armed_block else None
            reply = self._cand_block(cand, cand_windows, seeds=block, armed_at=armed_at)
            if not reply or reply.get("status") != "ok":
                return self._candidate_stopped(cand, reply)
            cand_ms += reply["ms"]
            self._note_hooks(reply)
            if not reply["plain"]:
                self.flags.append("non_plain_output")
            positions = [p for p in range(len(block)) if b * size + p in checked]
            if armed_at is not None:
                if extension_used and not reply.get("perturbed_calls"):
                    self.flags.append("kernel_unused_when_timed")  # the extension did not run in that call
                if armed_at not in positions:
                    positions.append(armed_at)
            if verify and positions:
                names = [f"timed_b{b}_{p}.pt" for p in positions]
                sample_seed = self.rng.randrange(2**31)  # sent after the calls: positions unknown before
                with self._spent("timing_checks"):
                    saved = cand.request("save", positions=positions, names=names, sample_seed=sample_seed)
                    if not saved:
                        return self._candidate_stopped(cand, None)
                    self._note_hooks(saved)
                    self._reference_ok(ref, ref.request("outputs", seeds=[block[p] for p in positions],
                                                        names=names, sample_seed=sample_seed),
                                       "saving outputs for the timed checks")
                    # Checked now, then removed: the window to rewrite a saved
                    # output is one block, and big outputs never pile up on disk.
                    self._check_timed_outputs(ref, [(name, p == armed_at and bool(reply.get("perturbed_calls")))
                                                    for p, name in zip(positions, names)])
        synchronized = False
        if cfg.device == "cuda":
            with self._spent("timing_sentinels"):
                synchronized = self._hidden_work(ref, cand, blocks[0], ref_ms, cand_ms)
            if synchronized:
                ref_ms, cand_ms, ref_windows, cand_windows = [], [], [], []
                for block in blocks:
                    ref_ms += self._ref_block(ref, cand, block, True, ref_windows)
                    reply = self._cand_block(cand, cand_windows, seeds=block, synchronized=True)
                    if not reply or reply.get("status") != "ok":
                        return self._candidate_stopped(cand, reply)
                    cand_ms += reply["ms"]
        # On a GPU a profiled call for every candidate that defines a kernel: its kernels'
        # share of the device time (the work share), and the launch evidence where no
        # extension module was built to count calls into (Triton, a custom op).
        observe = cfg.device == "cuda" and source.defines_kernel(self.src.evidence, cfg.device)
        with self._spent("timing_report"):
            report = cand.request("report", observe=observe)
        if not report or report.get("status") != "ok":
            return self._candidate_stopped(cand, report)
        if extension_used and cfg.device == "cpu":
            self.record["kernel_evidence"]["share"] = _work_share(self.trial_signals)
        audit = trusted_clock.audit(ref_windows, cand_windows)
        self.record.setdefault("timing", {})["windows"] = audit
        if audit["unaccounted"]:
            self.flags.append("timing_unaccounted")
        if not synchronized and self._slowed(ref_ms, alone):
            self._blame_slowdown(ref, cand, blocks[:max(1, BLAME_CALLS // size)], alone)
        self.stage_s["timing"] = round(time.monotonic() - t_start, 3)
        return self._timing_verdict(manifest, report, alone, ref_ms, cand_ms, synchronized)

    def _slowed(self, ref_ms: list[float], alone: list[float]) -> bool:
        return slower(ref_ms, alone, SLOWED_RATIO[self.cfg.device])

    def _blame_slowdown(self, ref: Worker, cand: Worker, blocks: list[list[int]], alone: list[float]) -> None:
        """The reference ran slower beside the candidate than before it. Its
        report is in, so time the reference once more beside the candidate
        (each block after a block of the candidate's calls, as in the timing),
        end the candidate (and all it started) and time it again at once: only
        a slowdown that goes away with the candidate, between these adjacent
        measurements, is the candidate's doing. Load from elsewhere that came
        during the timing and went (other jobs on a shared node) slows both
        alike, or neither, and is recorded, not a verdict."""
        beside: list[float] = []
        for block in blocks:
            with self._spent("timing_candidate"):
                reply = cand.request("block", seeds=block)
            if not reply or reply.get("status") != "ok":
                beside = []  # it would not run again: judged by the reference after it alone
                break
            beside += self._ref_block(ref, cand, block, False)
        cand.abort()
        cand.wait()
        after = [ms for block in blocks for ms in self._ref_block(ref, None, block, False)]
        timing = self.record.setdefault("timing", {})
        timing["reference_after_candidate_ms"] = metrics.median(after)
        if beside:
            timing["reference_beside_candidate_ms"] = metrics.median(beside)
            blamed = slowdown_is_the_candidates(beside, after, alone, SLOWED_RATIO[self.cfg.device])
        else:
            blamed = not self._slowed(after, alone)
        if blamed:
            self.flags.append("reference_slowed")

    def _check_timed_outputs(self, ref: Worker, checks: list[tuple[str, bool]]) -> None:
        results = self._compared(ref, [{"name": name, "file": name} for name, _ in checks])
        for (_, perturbed), cmp in zip(checks, results):
            if cmp.get("tampered"):
                self.flags.append("output_file_tampered")
            elif "unreadable" in cmp:
                self.flags.append("timing_output_mismatch")
            elif perturbed and cmp["ok"]:
                self.flags.append("kernel_unused_when_timed")
            elif not perturbed and not cmp["ok"]:
                self.flags.append("timing_output_mismatch")

    def _hidden_work(self, ref: Worker, cand: Worker, seeds: list[int], ref_ms: list[float],
                     cand_ms: list[float]) -> bool:
        """Does a call leave work running past its end event? Time a few calls
        of each side with a full device synchronize before the end event: the
        synchronize itself costs both sides alike, so only the candidate's
        excess over the reference's counts."""
        sentinel = seeds[:SENTINEL_CALLS]
        ref_synced = metrics.median(self._ref_block(ref, cand, sentinel, True))
        reply = cand.request("block", seeds=sentinel, synchronized=True)
        if not reply or reply.get("status") != "ok":
            return False
        events = metrics.median(cand_ms)
        excess = (metrics.median(reply["ms"]) - events) - (ref_synced - metrics.median(ref_ms))
        if excess > max((HIDDEN_WORK_RATIO - 1) * events, HIDDEN_WORK_MIN_MS):
            self.flags.append("unsynchronized_work")
            return True
        return False

    def _timing_verdict(self, manifest: dict[str, Any], report: dict[str, Any], alone: list[float],
                        ref_ms: list[float], cand_ms: list[float], synchronized: bool) -> dict[str, Any]:
        cfg = self.cfg
        self.record["runtime_ms"] = dict(metrics.summarize(cand_ms), samples=cand_ms)
        self.record["ref_runtime_ms"] = dict(metrics.summarize(ref_ms), samples=ref_ms)
        comparison = metrics.compare_timings(ref_ms, cand_ms, cfg.equivalence_margin)
        self.record.update(speedup=comparison["speedup"], speedup_ci=comparison["speedup_ci"],
                           timing_verdict=comparison["verdict"], faster=comparison["faster"])
        self.record.setdefault("timing", {}).update(
            inputs="fresh per call", synchronized=synchronized,
            reference_alone_ms=metrics.median(alone))
        self._note_patches(report)
        if report.get("builds"):
            self._note_builds(report)  # with the builds ModelNew made after the import (in __init__, forward)
        if fileio.sha256_file(self.reference) != self.reference_file_sha:
            self.flags.append("reference_modified")
        output_bytes = manifest["trials"][0]["output_bytes"]
        if self._implausibly_fast(cand_ms, comparison["speedup"], output_bytes):
            self.flags.append("excessive_speedup")
        launched = self._launched(report)
        self.record["kernel_evidence"]["launched"] = launched
        share = self.record["kernel_evidence"].get("share")
        if share is None and (report.get("launch") or {}).get("share") is not None:
            share = self.record["kernel_evidence"]["share"] = report["launch"]["share"]
        if launched["launched"] and share is not None and share < settings.KERNEL_SHARE_MIN:
            self.flags.append("kernel_share_low")
        static = source.defines_kernel(self.src.evidence, cfg.device)
        self.record["custom_kernel"] = bool(static and launched["launched"]
                                            and not set(self.flags) & cheats.NOT_A_KERNEL_FLAGS)
        if cheats.cheats_among(self.flags):
            self.record["faster"] = False
            return self._finish("cheat", self._cheat_error(self._log_path()))
        ci = comparison["speedup_ci"]
        clear = ci and (ci[0] > CLEAR_RATIO or ci[1] < 1 / CLEAR_RATIO)  # a wide interval far from 1 still decides
        if cfg.device == "cpu" and ci and ci[0] > 0 and ci[1] / ci[0] > UNSTABLE_WIDTH and not clear:
            self.flags.append("timing_unstable")
            self.record["faster"] = None
            self.record["timing_verdict"] = "unstable"
            return self._finish("correct_unstable" if self.record["custom_kernel"] else "no_custom_kernel")
        if not self.record["custom_kernel"]:
            return self._finish("no_custom_kernel")
        return self._finish({"faster": "correct_faster", "slower": "correct_slower"}.get(comparison["verdict"],
                                                                                          "correct_tie"))

    def _note_patches(self, report: dict[str, Any]) -> None:
        if report.get("patched_harness"):
            self.flags.append("patched_harness")
        if report.get("patched_torch"):
            self.flags.append("patched_torch")
        if report.get("settings_changed"):
            self.flags.append("changed_global_settings")
            self.record["settings_changed"] = sorted(set(self.record.get("settings_changed") or []) |
                                                     set(report["settings_changed"]))
        lowered = report.get("reduced_precision")
        if lowered:
            # What it did (autocast, TF32): from the candidate's process, so bounded here.
            shown = [str(x)[:100] for x in lowered[:20]] if isinstance(lowered, list) else ["(unreadable)"]
            self.flags.append("reduced_precision_math")
            self.record["reduced_precision"] = sorted(set(self.record["reduced_precision"]) | set(shown))
        self.record["patched"] = sorted(set(self.record.get("patched") or []) |
                                        set(report.get("patched_harness", [])) |
                                        set(report.get("patched_torch", [])))[:20]

    def _launched(self, report: dict[str, Any]) -> dict[str, Any]:
        """Launch evidence from the judged calls themselves: calls into the
        candidate's extension modules. Only a candidate without any (Triton,
        custom ops) is judged by a profiled call, which it could tell apart."""
        calls = report.get("extension_calls") or {}
        observed = report.get("launch") or {}
        launched = bool(calls) if report.get("extension_modules") else bool(observed.get("launched"))
        return {"launched": launched, "extension_calls": calls,
                "kernels": observed.get("kernels", []), "custom_ops": observed.get("custom_ops", []),
                "other_kernels": observed.get("other_kernels", [])}

    def _implausibly_fast(self, cand_ms: list[float], speedup: float | None, output_bytes: int) -> bool:
        """Beyond the configured speedup bound, or faster than writing the
        output at twice the device's peak bandwidth allows."""
        if not cand_ms or any(not math.isfinite(x) or x <= 0 for x in cand_ms):
            return True
        if speedup is not None and speedup > self.cfg.speedup_bound:
            return True
        peak = self.device_info.get("peak_bytes_per_s") or settings.FALLBACK_PEAK_BYTES_PER_S[self.cfg.device]
        return metrics.median(cand_ms) < output_bytes / (2.0 * peak) * 1e3


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
