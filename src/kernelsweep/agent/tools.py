"""The agent's tools: what each does and the observation the model reads.

Every tool sees only the task (reference.py in the workspace), the workspace and
the docs corpus. Candidate code (run, evaluate, profile of the candidate) runs
only in child process groups with hard limits, each holding the study's timing
slot (kernelsweep.runtime.gpu_slots): one timing on a device at a time."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from kernelsweep.study import layout
from kernelsweep.agent import ncu
from kernelsweep.agent.guards import normalise_error
from kernelsweep.agent.protocol import CANDIDATE_FILE, EDITING, TOOLS, ToolCall
from kernelsweep.agent.sandbox import run_script
from kernelsweep.agent.workspace import Workspace, WorkspaceError
from kernelsweep.prompting.distill import distill
from kernelsweep.core.fileio import write_json
from kernelsweep.core.verdict import SUCCESS_CATEGORIES

DOCS_K = 3


@dataclass
class Context:
    """What the tools of one cell work with (none of it is shown to the model but the workspace)."""

    workspace: Workspace
    reference: Path              # the task's reference file, read by the evaluator and the profiler
    attempts_dir: Path           # one folder per evaluation / profile: candidate, eval.json, logs
    device: str
    precision: str
    evaluation: dict[str, Any]   # config: evaluation
    profile_timeout_s: float
    build_dir: Path
    flags: dict[str, Any]        # the method's flags
    corpus: str | None
    slots: dict[str, Any]        # {results, gpus, devices} for kernelsweep.runtime.gpu_slots
    task_sha256: str | None = None


@contextlib.contextmanager
def child_env(**values: str) -> Iterator[None]:
    """Set variables for the children started meanwhile (this process runs no CUDA)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@contextlib.contextmanager
def device_slot(ctx: Context) -> Iterator[None]:
    """Hold the study's timing slot; point CUDA at the claimed GPU meanwhile."""
    from kernelsweep.runtime import gpu_slots

    devices = gpu_slots.slot_devices(ctx.slots.get("gpus"), ctx.slots.get("devices"))
    folder = gpu_slots.resolve_slots_dir(None, ctx.slots["results"], cpu=devices == [gpu_slots.CPU_DEVICE])
    with gpu_slots.claim_slot(folder, devices, label="react tool") as claim:
        with child_env(**({"CUDA_VISIBLE_DEVICES": claim.device} if claim.is_gpu else {})):
            yield


class Toolbox:
    def __init__(self, ctx: Context):
        self.ctx = ctx
        self._corpus = None

    # -- dispatch --------------------------------------------------------------

    def call(self, call: ToolCall, state) -> dict[str, Any]:
        """Run one tool call; the tool record's fields (without kind/seq/time)."""
        started = time.monotonic()
        out: dict[str, Any] = {"call_id": call.id, "name": call.name, "args": call.args, "ok": False,
                               "data": None, "error_key": None, "blocked_by": None, "mutation": None}
        try:
            if call.name not in TOOLS or "_invalid" in call.args:
                raise WorkspaceError(f"cannot run {call.name!r}: unknown tool or arguments that are not JSON")
            writes = call.name in EDITING or bool(call.args.get("code"))
            if writes and state.profile_required:
                out["blocked_by"] = "force_profile"
                raise WorkspaceError("edit refused: the force_profile guard is on. Call profile "
                                     "(target: reference or candidate) before changing code.")
            if call.args.get("code") and call.name not in EDITING:
                out["mutation"] = self._write(CANDIDATE_FILE, str(call.args["code"]))
            out.update(getattr(self, f"_{call.name}")(call.args, state))
        except WorkspaceError as e:
            out["observation"] = f"error: {e}"
        out["wall_s"] = round(time.monotonic() - started, 3)
        out["observation"] = self._bounded(out["observation"])
        return out

    def _bounded(self, text: str) -> str:
        limit = int(self.ctx.flags.get("output_chars") or 4000)
        return text if len(text) <= limit else text[:limit // 2] + "\n… (cut) …\n" + text[-limit // 2:]

    def _write(self, name: str, content: str) -> dict[str, Any]:
        self.ctx.workspace.write(name, content)
        return {"path": name, "content": content}

    # -- editor ----------------------------------------------------------------

    def _write_file(self, args, state) -> dict[str, Any]:
        mutation = self._write(args["path"], str(args["content"]))
        return {"ok": True, "mutation": mutation, "observation": f"wrote {args['path']}"}

    def _edit_file(self, args, state) -> dict[str, Any]:
        message = self.ctx.workspace.edit(args["path"], str(args["old"]), str(args["new"]))
        content = self.ctx.workspace.read(args["path"])
        return {"ok": True, "mutation": {"path": args["path"], "content": content}, "observation": message}

    def _view_file(self, args, state) -> dict[str, Any]:
        limit = int(self.ctx.flags.get("output_chars") or 4000)
        return {"ok": True, "observation": self.ctx.workspace.view(args["path"], limit)}

    # -- run -------------------------------------------------------------------

    def _run(self, args, state) -> dict[str, Any]:
        script = self.ctx.workspace.resolve(args["path"])
        if not script.is_file():
            raise WorkspaceError(f"{args['path']} does not exist")
        timeout = float(self.ctx.flags.get("run_timeout_s") or 120)
        with device_slot(self.ctx):
            done = run_script(self.ctx.workspace.root, script, timeout, int(self.ctx.flags.get("output_chars") or 4000))
        ok = done.returncode == 0
        return {"ok": ok, "observation": done.describe(timeout),
                "data": {"returncode": done.returncode, "timed_out": done.timed_out, "wall_s": done.wall_s},
                "error_key": None if ok else normalise_error("run", "timeout" if done.timed_out else done.output)}

    # -- evaluate / submit -------------------------------------------------------

    def _evaluate(self, args, state) -> dict[str, Any]:
        return self._judge(state, submit=False)

    def _submit(self, args, state) -> dict[str, Any]:
        return self._judge(state, submit=True)

    def _judge(self, state, submit: bool) -> dict[str, Any]:
        code = self.ctx.workspace.read(CANDIDATE_FILE)
        if code is None:
            raise WorkspaceError(f"there is no {CANDIDATE_FILE} yet: write it first")
        folder = self.ctx.attempts_dir / f"a{len(state.attempts) + 1:03d}"
        result = self._evaluate_file(folder, code)
        header = "submission" if submit else "evaluation"
        lines = [f"{header} {len(state.submissions) + 1 if submit else len(state.attempts) + 1}:", distill(result)]
        if result.get("speedup_ci"):
            lo, hi = result["speedup_ci"]
            lines.append(f"- speedup 95% interval: [{lo:.3g}, {hi:.3g}] ({result.get('timing_verdict')})")
        category = result.get("category")
        ok = category in SUCCESS_CATEGORIES
        error = None if ok else normalise_error(category, (result.get("error") or {}).get("message"))
        return {"ok": ok, "observation": "\n".join(lines), "error_key": error,
                "data": {"eval": result, "folder": str(folder)}}

    def _evaluate_file(self, folder: Path, code: str) -> dict[str, Any]:
        from kernelsweep.evaluator import compile_candidate, evaluate

        folder.mkdir(parents=True, exist_ok=True)
        candidate = folder / layout.CANDIDATE
        candidate.write_text(code, encoding="utf-8")
        e = self.ctx.evaluation
        # Build first, outside the timing slot (as the compile rule does for the other
        # strategies): a build takes a CPU core for tens of seconds, and holding the
        # slot meanwhile would stall every other timing job. The evaluation then finds
        # the build in the cache (same build folder, same candidate hash).
        compile_candidate(candidate, device=self.ctx.device, build_dir=self.ctx.build_dir,
                          timeout_s=e["compile_timeout_s"], log_dir=folder)
        with device_slot(self.ctx):
            result = evaluate(self.ctx.reference, candidate, device=self.ctx.device, precision=self.ctx.precision,
                              trials=e["trials"], timing_trials=e["timing_trials"], warmup=e["warmup"],
                              timeout_s=e["timeout_s"], compile_timeout_s=e["compile_timeout_s"],
                              equivalence_margin=e["equivalence_margin"], shape_variants=e["shape_variants"],
                              tolerance=e["tolerance"],
                              build_dir=self.ctx.build_dir,
                              log_dir=folder, task_sha256=self.ctx.task_sha256)
        write_json(folder / layout.EVAL, result)
        return result

    # -- profile -----------------------------------------------------------------

    def _profile(self, args, state) -> dict[str, Any]:
        from kernelsweep.profiling import profile_reference, render_for_prompt

        target = str(args.get("target", "reference")).strip().lower()
        if target not in ("reference", "candidate"):
            raise WorkspaceError("target must be 'reference' or 'candidate'")
        path = self.ctx.reference
        if target == "candidate":
            code = self.ctx.workspace.read(CANDIDATE_FILE)
            if code is None:
                raise WorkspaceError(f"there is no {CANDIDATE_FILE} to profile")
            folder = self.ctx.attempts_dir / f"p{state.tool_calls + 1:03d}"
            folder.mkdir(parents=True, exist_ok=True)
            # The profiler runs `Model` with the task's inputs: the candidate's ModelNew under that name.
            path = folder / "profile_target.py"
            path.write_text(self.ctx.reference.read_text(encoding="utf-8") + "\n\n" + code +
                            "\n\nModel = ModelNew\n", encoding="utf-8")
        # The candidate's extensions build where the agent's own scripts built them (reused, not rebuilt).
        extensions = str(self.ctx.workspace.root / ".torch_extensions")
        ncu_tool = ncu.available(self.ctx.device)
        with device_slot(self.ctx), child_env(TORCH_EXTENSIONS_DIR=extensions):
            record = profile_reference(path, self.ctx.device, self.ctx.precision,
                                       timeout_s=self.ctx.profile_timeout_s, task=target)
            counters = ncu.profile(ncu_tool, path, self.ctx.attempts_dir / f"n{state.tool_calls + 1:03d}",
                                   self.ctx.profile_timeout_s) if ncu_tool and record.get("status") == "ok" else None
        text = render_for_prompt(record) + (f"\n{counters}" if counters else "")
        if target == "candidate":
            text = text.replace("Reference profile", "Candidate profile", 1)
        ok = record.get("status") == "ok"
        return {"ok": ok, "observation": text, "data": {"target": target, "status": record.get("status")}}

    # -- docs --------------------------------------------------------------------

    def _search_docs(self, args, state) -> dict[str, Any]:
        from kernelsweep.prompting.retrieval import Corpus, default_corpus_dir

        if self._corpus is None:
            self._corpus = Corpus.from_dir(self.ctx.corpus or default_corpus_dir())
        passages = self._corpus.search(str(args["query"]), DOCS_K)
        if not passages:
            return {"ok": True, "observation": "no passage matched", "data": {"tags": []}}
        text = "\n\n".join(f"[{p.tag}]\n{p.text.strip()}" for p in passages)
        return {"ok": True, "observation": text, "data": {"tags": [p.tag for p in passages]}}
