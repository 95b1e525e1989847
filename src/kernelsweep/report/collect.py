"""Raw result files -> two tidy tables (one row per candidate, one per expected
cell) plus the problems found on the way. Reads only the files of
docs/results.md; nothing here decides what a number means beyond copying the
evaluator's verdict and comparing timings through kernelsweep.core.metrics."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from kernelsweep.core import verdict
from kernelsweep.study import layout
from kernelsweep.models.records import RESPONSE_SCHEMA, call_usage, token_usage
from kernelsweep.report.baselines import (Baseline, Comparator, baseline_column_names, parse_baseline,
                                          timing_column_names)
from kernelsweep.report.spec import StudySpec

FINAL_STATUSES = ("evaluated", "no_candidate", "generation_failed")
# Cells whose final.json says the method produced nothing to evaluate. They have a
# result (so they count in denominators, as not successful) and are listed by name.
FAILED_STATUSES = ("no_candidate", "generation_failed")
ENVIRONMENT_KEYS = ("device_name", "driver", "torch", "cuda", "python")

KEY_COLUMNS = ["precision", "model", "method", "task", "level", "sample"]
OUTCOME_COLUMNS = ["category", "compiled", "correct", "custom_kernel", "kernel_success", "plain_pytorch_correct",
                   "correct_task_shape", "kernel_share"]


@dataclass
class Problem:
    """Something in the raw results the reader must know about."""

    path: str
    message: str
    effect: str = "warning"  # "excluded": the file was left out of every number


@dataclass
class Collection:
    spec: StudySpec
    candidates: pd.DataFrame
    cells: pd.DataFrame
    baselines: dict[str, Baseline]
    environments: list[dict[str, Any]]  # distinct eval environments with their counts
    problems: list[Problem] = field(default_factory=list)
    unexpected_runs: list[str] = field(default_factory=list)  # precision/model/method folders not in the study
    # Tasks whose validation found their outputs independent of their inputs: id -> reason.
    degenerate_tasks: dict[str, str] = field(default_factory=dict)
    # A study of several precisions: each precision's own collection (its baselines
    # and environments are its own); the frames above hold them all.
    slices: dict[str, Collection] = field(default_factory=dict)

    def by_precision(self) -> list[Collection]:
        """One collection per precision of the study (this one itself when it has one)."""
        return list(self.slices.values()) or [self]


def candidate_columns(spec: StudySpec) -> list[str]:
    return (KEY_COLUMNS + ["turn", "candidate", "cell_status", "evaluated"] + OUTCOME_COLUMNS
            + timing_column_names(spec.other_modes)
            + ["runtime_ms", "ref_runtime_ms", "prompt_tokens", "completion_tokens", "tokens",
               "llm_latency_s", "eval_wall_s", "compile_s", "flags", "error_type", "device_name"])


def cell_columns(spec: StudySpec) -> list[str]:
    return (KEY_COLUMNS + ["status", "has_result", "compile_baseline", "task_degenerate", "best_turn", "best_candidate"]
            + OUTCOME_COLUMNS
            + timing_column_names(spec.other_modes)
            + ["turns_run", "candidates_evaluated", "llm_calls", "generator_calls", "role_calls",
               "prompt_tokens", "completion_tokens", "tokens", "generation_s", "evaluation_s"])


BOOL_COLUMNS = {"has_result", "compile_baseline", "task_degenerate", "evaluated", "compiled", "correct", "custom_kernel", "kernel_success",
                "plain_pytorch_correct", "correct_task_shape"}
INT_COLUMNS = {"level", "sample", "turn", "candidate", "best_turn", "best_candidate", "turns_run",
               "candidates_evaluated", "llm_calls", "generator_calls", "role_calls", "prompt_tokens",
               "completion_tokens", "tokens"}


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=columns)
    for col in columns:
        if col in BOOL_COLUMNS or col.startswith("faster_"):
            frame[col] = frame[col].astype("boolean")
        elif col in INT_COLUMNS:
            frame[col] = frame[col].astype("Int64")
        elif col.startswith("speedup_") or col.endswith(("_s", "_ms")):
            frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
        else:
            frame[col] = frame[col].astype("string")
    return frame


class _Reader:
    """Reads JSON files, recording unreadable ones as problems instead of crashing."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems

    def read(self, path: Path, effect: str = "excluded") -> dict[str, Any] | None:
        try:
            with open(path, encoding="utf-8") as f:
                data = json.load(f)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            self.problems.append(Problem(str(path), f"unreadable ({e}); left out", effect))
            return None
        if not isinstance(data, dict):
            self.problems.append(Problem(str(path), "not a JSON object; left out", effect))
            return None
        return data


def outcome(result: Mapping[str, Any] | None) -> dict[str, Any]:
    """The outcome columns of one eval record (the evaluator's verdict, copied)."""
    result = result or {}
    category = result.get("category")
    evaluated = category in verdict.CATEGORIES
    correct = bool(result.get("correct")) if evaluated else None
    custom = bool(result.get("custom_kernel")) if evaluated else None
    return {
        "category": category,
        "compiled": result.get("compiled") if evaluated else None,
        "correct": correct,
        "custom_kernel": custom,
        # a success needs the evaluator's category *and* its two facts to agree
        "kernel_success": (category in verdict.SUCCESS_CATEGORIES and bool(correct) and bool(custom))
        if evaluated else None,
        "plain_pytorch_correct": (category == "no_custom_kernel") if evaluated else None,
        # what a single-shape evaluation counts as correct: right on the task's own
        # shape (`correct` also needs every shape variant, docs/taxonomy.md)
        "correct_task_shape": (category in verdict.CORRECT_ON_TASK_SHAPE) if evaluated else None,
        # the share of the forward's time in the candidate's own code (kernel_evidence.share)
        "kernel_share": (result.get("kernel_evidence") or {}).get("share") if evaluated else None,
    }


def _cand(turn: Any, cand: Any) -> str:
    """A candidate's folder within its cell, as problems name it."""
    return layout.cand_dir("", turn, cand).as_posix()


def _median(timing: Any) -> float | None:
    return timing.get("median") if isinstance(timing, Mapping) else None


def _response_records(cell_dir: Path, reader: _Reader) -> list[dict[str, Any]]:
    """Every model-call record of a cell: candidate responses and the agentic roles'
    records (analysis, brief, feedback), whether a file is a response record itself
    or holds one under 'response'."""
    records = []
    for path in sorted(cell_dir.rglob("*.json")):
        if path.name in (layout.FINAL, layout.EVAL):
            continue
        data = reader.read(path, effect="warning")
        if data is None:
            continue
        for record in (data, data.get("response")):
            if isinstance(record, dict) and record.get("schema") == RESPONSE_SCHEMA:
                records.append(record)
                break
    return records


class _Collector:
    def __init__(self, results: Path, spec: StudySpec):
        self.results = results
        self.spec = spec
        self.problems: list[Problem] = []
        self.reader = _Reader(self.problems)
        self.comparator = Comparator(spec.other_modes, spec.compile_modes, spec.equivalence_margin)
        self.environments: Counter = Counter()
        self.baselines = self._baselines()
        self.mismatched_tasks: set[str] = set()  # baseline on another device than a candidate
        self.task_hashes: dict[str, str | None] = {}
        self.task_degenerate: dict[str, bool | None] = {}  # None: not checked (forward skipped, older records)
        self.degenerate_reasons: dict[str, str] = {}
        self._read_tasks()

    def _baselines(self) -> dict[str, Baseline]:
        found = {}
        for task in self.spec.tasks:
            path = self.results / self._baseline_path(task.id)
            record = self.reader.read(path)
            if record is None:
                continue
            baseline = parse_baseline(task.id, record, self.spec.baseline_modes)
            if baseline.precision not in (None, self.spec.precision):
                self.problems.append(Problem(str(path), f"baseline precision {baseline.precision} differs from the "
                                             f"study's {self.spec.precision}; torch.compile comparisons left out",
                                             "excluded"))
                continue
            stranded = [m for m in self.spec.other_modes if m in baseline.samples and not baseline.comparable(m)]
            if stranded:
                self.problems.append(Problem(str(path), "no usable eager timing "
                                             f"({baseline.unusable.get('eager', 'not measured')}) and none timed "
                                             f"beside {', '.join(stranded)}: the task's comparisons with "
                                             "them, which go through eager, are left out", "excluded"))
            found[task.id] = baseline
        return found

    def _baseline_path(self, task: str) -> str:
        return layout.BASELINE.format(device=self.spec.device, precision=self.spec.precision, task=task)

    def _read_tasks(self) -> None:
        """Each task file's hash and its validation's degeneracy verdict."""
        for task in self.spec.tasks:
            record = self.reader.read(self.results / layout.TASK.format(task=task.id), effect="warning") or {}
            self.task_hashes[task.id] = record.get("sha256")
            validation = record.get("validation") or {}
            degenerate = validation.get("degenerate")
            self.task_degenerate[task.id] = degenerate if isinstance(degenerate, bool) else None
            if degenerate is True:
                self.degenerate_reasons[task.id] = str(validation.get("degenerate_reason") or "")

    def _check_eval(self, path: Path, record: Mapping[str, Any], task: str) -> None:
        provenance = record.get("provenance") or {}
        if record.get("category") in verdict.CATEGORIES:
            self.environments[tuple(provenance.get(k) for k in ENVIRONMENT_KEYS)] += 1
        expected_hash = self.task_hashes.get(task)
        if expected_hash and provenance.get("task_sha256") not in (None, expected_hash):
            self.problems.append(Problem(str(path), "evaluated against a different version of the task "
                                         "(task_sha256 differs from tasks/{task}.json)".format(task=task)))
        category = record.get("category")
        facts = bool(record.get("correct")) and bool(record.get("custom_kernel"))
        if category in verdict.CATEGORIES and facts != (category in verdict.SUCCESS_CATEGORIES):
            self.problems.append(Problem(str(path), f"category {record.get('category')!r} disagrees with correct="
                                         f"{record.get('correct')} and custom_kernel={record.get('custom_kernel')}; "
                                         "counted as a kernel success only if both agree"))
        margin = provenance.get("equivalence_margin")
        if record.get("speedup_ci") and margin is not None and margin != self.spec.equivalence_margin:
            self.problems.append(Problem(str(path), f"timed with equivalence margin {margin} but the study's is "
                                         f"{self.spec.equivalence_margin}: its faster/tie/slower verdict against "
                                         "eager follows the older margin; rerun it"))
        profile = provenance.get("tolerance")
        if category in verdict.CATEGORIES and profile is not None and self.spec.tolerance is not None \
                and profile != self.spec.tolerance:
            self.problems.append(Problem(str(path), f"judged under tolerance profile {profile!r} but the study names "
                                         f"{self.spec.tolerance!r}: its correctness follows the other bound; "
                                         "rerun it"))
        variants = provenance.get("shape_variants")
        if category in verdict.CATEGORIES and variants is not None and variants != self.spec.shape_variants:
            self.problems.append(Problem(str(path), f"judged on {variants} shape variant(s) but the study names "
                                         f"{self.spec.shape_variants}: its correctness follows the other count; "
                                         "rerun it"))
        for key, expected in (("device", self.spec.device), ("precision", self.spec.precision)):
            if record.get(key) not in (None, expected):
                self.problems.append(Problem(str(path), f"{key} {record.get(key)!r} differs from the study's "
                                             f"{expected!r}"))

    def _baseline_for(self, task: str, device_name: Any) -> Baseline | None:
        baseline = self.baselines.get(task)
        if baseline is None or not device_name or not baseline.device_name or baseline.device_name == device_name:
            return baseline
        self.mismatched_tasks.add(task)
        self.problems.append(Problem(
            str(self.results / self._baseline_path(task)),
            f"baseline measured on {baseline.device_name!r} but candidates ran on {device_name!r}; "
            "the task's torch.compile comparisons are left out", "excluded"))
        return None

    def has_compile_baseline(self, task: str) -> bool:
        baseline = self.baselines.get(task)
        return (baseline is not None and task not in self.mismatched_tasks
                and baseline.best_compile_mode(self.spec.compile_modes) is not None)

    def cell(self, model: str, method: str, task: str, sample: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        level = self.spec.task(task).level
        key = {"precision": self.spec.precision, "model": model, "method": method, "task": task, "level": level,
               "sample": sample}
        cell_dir = self.results / layout.CELL.format(**key)
        final_path = cell_dir / layout.FINAL
        final = self.reader.read(final_path)
        status = self._status(final, final_path, key)

        candidates = []
        for turn, turn_dir in layout.numbered(cell_dir, "turn"):
            for cand, cand_dir in layout.numbered(turn_dir, "cand"):
                candidates.append(self._candidate(key, status, turn, cand, cand_dir))
        responses = _response_records(cell_dir, self.reader) if cell_dir.is_dir() else []

        cell = {**key, "status": status, "has_result": status in ("evaluated", *FAILED_STATUSES),
                "task_degenerate": self.task_degenerate.get(task)}
        result = (final or {}).get("result") if status == "evaluated" else None
        if status == "evaluated":
            cell.update(outcome(result))
            best = final.get("best") or {}
            cell["best_turn"], cell["best_candidate"] = best.get("turn"), best.get("cand")
            self._check_best(final_path, best, result, candidates)
        elif status in FAILED_STATUSES:
            cell.update({"category": status, "compiled": False, "correct": False, "custom_kernel": False,
                         "kernel_success": False, "plain_pytorch_correct": False, "correct_task_shape": False})
        device_name = ((result or {}).get("provenance") or {}).get("device_name")
        self.comparator.fill(cell, result, self._baseline_for(task, device_name) if result else None)

        used = call_usage(responses)
        calls = used.calls
        cell.update({
            "turns_run": (final or {}).get("turns_run") if cell["has_result"] else None,
            "candidates_evaluated": sum(1 for c in candidates if c["evaluated"]),
            "llm_calls": len(calls),
            "generator_calls": sum(1 for r in calls if r.get("role", "generator") == "generator"),
            "role_calls": sum(1 for r in calls if r.get("role", "generator") != "generator"),
            "prompt_tokens": used.prompt_tokens,
            "completion_tokens": used.completion_tokens,
            "generation_s": used.seconds,
            "evaluation_s": sum(float(c["eval_wall_s"] or 0.0) for c in candidates),
        })
        cell["tokens"] = cell["prompt_tokens"] + cell["completion_tokens"]
        if cell["has_result"]:
            self._check_counts(final_path, final, cell, calls)
        return cell, candidates

    def _status(self, final: Mapping[str, Any] | None, path: Path, key: Mapping[str, Any]) -> str:
        if final is None:
            return "unreadable" if path.exists() else "missing"
        for field_name in ("model", "method", "task", "sample", "precision"):
            if field_name in final and final[field_name] != key[field_name]:
                self.problems.append(Problem(str(path), f"final.json says {field_name}={final[field_name]!r} but lies "
                                             f"in the folder of {key[field_name]!r}; left out", "excluded"))
                return "unreadable"
        status = final.get("status")
        if status not in FINAL_STATUSES:
            self.problems.append(Problem(str(path), f"unknown status {status!r}; left out", "excluded"))
            return "unreadable"
        if status == "evaluated":
            category = (final.get("result") or {}).get("category")
            if category in verdict.NOT_EVALUATED:
                return category if category in FAILED_STATUSES else "no_candidate"
            if category not in verdict.CATEGORIES:
                self.problems.append(Problem(str(path), f"result category {category!r} is not in the taxonomy; "
                                             "left out", "excluded"))
                return "unreadable"
        return status

    def _candidate(self, key: Mapping[str, Any], status: str, turn: int, cand: int, cand_dir: Path) -> dict[str, Any]:
        eval_path = cand_dir / layout.EVAL
        record = self.reader.read(eval_path)
        response = self.reader.read(cand_dir / layout.RESPONSE, effect="warning") or {}
        row = {**key, "turn": turn, "candidate": cand, "cell_status": status}
        row.update(outcome(record))
        row["evaluated"] = bool(record) and record.get("category") in verdict.CATEGORIES
        if record:
            self._check_eval(eval_path, record, key["task"])
        provenance = (record or {}).get("provenance") or {}
        self.comparator.fill(row, record, self._baseline_for(key["task"], provenance.get("device_name"))
                             if record else None)
        prompt_tokens, completion_tokens = token_usage(response)
        error = (record or {}).get("error") or {}
        row.update({
            "runtime_ms": _median((record or {}).get("runtime_ms")),
            "ref_runtime_ms": _median((record or {}).get("ref_runtime_ms")),
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "tokens": None if prompt_tokens is None and completion_tokens is None
            else (prompt_tokens or 0) + (completion_tokens or 0),
            "llm_latency_s": response.get("latency_s"),
            "eval_wall_s": (record or {}).get("wall_s"),
            "compile_s": (record or {}).get("compile_s"),
            "flags": ",".join((record or {}).get("flags") or []),
            "error_type": error.get("type") if isinstance(error, Mapping) else None,
            "device_name": provenance.get("device_name"),
        })
        return row

    def _check_best(self, path: Path, best: Mapping[str, Any], result: Mapping[str, Any] | None,
                    candidates: list[dict[str, Any]]) -> None:
        """The final result must be one of the cell's candidates, and the best of them."""
        if not candidates:
            return
        at = {(c["turn"], c["candidate"]): c for c in candidates}
        chosen = at.get((best.get("turn"), best.get("cand")))
        if chosen is None:
            self.problems.append(Problem(str(path), f"best candidate {_cand(best.get('turn'), best.get('cand'))} has no "
                                         "eval.json in the cell"))
            return
        if chosen["category"] != (result or {}).get("category"):
            self.problems.append(Problem(str(path), f"result category {(result or {}).get('category')!r} differs "
                                         f"from {_cand(chosen['turn'], chosen['candidate'])}/{layout.EVAL} "
                                         f"({chosen['category']!r})"))
        top = verdict.best_of([self._record_view(c) for c in candidates])
        if top is not None and verdict.selection_key(self._record_view(candidates[top])) > \
                verdict.selection_key(self._record_view(chosen)):
            better = candidates[top]
            self.problems.append(Problem(str(path), f"{_cand(better['turn'], better['candidate'])} ranks above the chosen "
                                         f"best {_cand(chosen['turn'], chosen['candidate'])} by the selection order"))

    @staticmethod
    def _record_view(row: Mapping[str, Any]) -> dict[str, Any]:
        return {"category": row["category"], "correct": row["correct"], "custom_kernel": row["custom_kernel"],
                "compiled": row["compiled"], "speedup": row["speedup_eager"]}

    def _check_counts(self, path: Path, final: Mapping[str, Any], cell: Mapping[str, Any], calls: list) -> None:
        """final.json's own tallies must agree with the raw files the report counts."""
        recorded = {"candidates_evaluated": final.get("candidates_evaluated"), "llm_calls": final.get("llm_calls")}
        for name, value in recorded.items():
            if value is not None and value != cell[name]:
                self.problems.append(Problem(str(path), f"final.json records {name}={value} but the cell's files "
                                             f"show {cell[name]}; the report uses the files"))
        if any(token_usage(r) == (None, None) for r in calls if r.get("status") == "ok"):
            self.problems.append(Problem(str(path), "some model calls have no token usage; token totals are a "
                                         "lower bound"))



def unexpected_runs(results: Path, spec: StudySpec) -> list[str]:
    """Folders under runs/ that no cell of the study reads: another precision, model or method."""
    runs = results / layout.RUNS
    found = []
    for precision in sorted(runs.iterdir()) if runs.is_dir() else []:
        if not precision.is_dir():
            continue
        if precision.name not in spec.precisions:
            found.append(precision.name)
            continue
        found += sorted(f"{precision.name}/{model.name}/{method.name}" for model in precision.iterdir()
                        if model.is_dir() for method in model.iterdir() if method.is_dir()
                        if model.name not in spec.models or method.name not in spec.methods)
    return found


def collect(results: str | Path, spec: StudySpec, jobs: int = 1) -> Collection:
    """Read every expected cell of the study from `results` (docs/results.md), precision
    by precision; `jobs` processes compute the torch.compile comparisons."""
    slices = {p: _collect_precision(Path(results), spec.at(p), jobs) for p in spec.precisions}
    if len(slices) == 1:
        return next(iter(slices.values()))
    parts = list(slices.values())
    environments: Counter = Counter()
    for part in parts:
        for env in part.environments:
            environments[tuple(env[k] for k in ENVIRONMENT_KEYS)] += env["evaluations"]
    return Collection(
        spec=spec,
        candidates=pd.concat([c.candidates for c in parts], ignore_index=True),
        cells=pd.concat([c.cells for c in parts], ignore_index=True),
        baselines={},  # per precision: slices[p].baselines
        environments=[dict(zip(ENVIRONMENT_KEYS, env), evaluations=n)
                      for env, n in sorted(environments.items(), key=lambda kv: -kv[1])],
        problems=[p for c in parts for p in c.problems],
        unexpected_runs=unexpected_runs(Path(results), spec),
        slices=slices,
        degenerate_tasks={t: r for part in parts for t, r in part.degenerate_tasks.items()},
    )


def _collect_precision(results: Path, spec: StudySpec, jobs: int) -> Collection:
    """collect() for a study, or a slice of a study, of one precision."""
    collector = _Collector(results, spec)
    cells, candidates = [], []
    for model, method, task, sample in spec.expected_cells():
        cell, cands = collector.cell(model, method, task, sample)
        cells.append(cell)
        candidates.extend(cands)
    collector.comparator.resolve(jobs)
    # A baseline from another device compares nothing: blank the task's compile columns everywhere.
    compile_columns = baseline_column_names(spec.other_modes)
    for row in cells + candidates:
        if row["task"] in collector.mismatched_tasks:
            row.update(dict.fromkeys(compile_columns))
    for row in cells:
        row["compile_baseline"] = collector.has_compile_baseline(row["task"])
    problems = list({(p.path, p.message): p for p in collector.problems}.values())  # once each
    environments = [dict(zip(ENVIRONMENT_KEYS, env), evaluations=n)
                    for env, n in sorted(collector.environments.items(), key=lambda kv: -kv[1])]
    return Collection(
        spec=spec,
        candidates=_frame(candidates, candidate_columns(spec)),
        cells=_frame(cells, cell_columns(spec)),
        baselines=collector.baselines,
        environments=environments,
        problems=problems,
        unexpected_runs=unexpected_runs(results, spec),
        degenerate_tasks=collector.degenerate_reasons,
    )
