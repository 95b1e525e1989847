"""Published corpora as a model: each row of a corpus (task, code, claimed numbers) is
the one candidate of its cell, so a corpus runs through the study like any method's
cells (cached, resumable, SLURM-able) and the report sets each claim beside what
was measured (kernelsweep.report.claims, docs/results.md "Published claims").

A model entry `backend: corpus` names a `path` and its `format`:

- `cuda-l1`: CUDA-L1's files (one JSON object a line): `level_id`, `task_id`,
  `ref_code`, `custom_code` (may be empty or null: the cell is `no_code`) and the
  claimed speedups `score_default` (over eager PyTorch),
  `score_torch_compile_default`, `score_torch_compile_reduce_overhead`,
  `score_cuda_graph`, `score_cudnn`; claimed at atol = rtol = 1e-2.
- `jsonl`: any JSON lines with `task` (`L1-001`) or `level` + `task_id`, `code`
  (string, empty or null), `claims` ({baseline: speedup}, baselines as in
  BASELINES) or `claimed_speedup` (+ `baseline`, default eager), optional
  `atol`, `rtol`, `ref_code`, `gpu`.
- `replay`: a replay file of a published study (models.replay's format): per task,
  the record marked `final` (else the last turn) of sample 0 is the row; its
  `raw_response` is extracted as the study extracted it; the claim is
  `study_verdict.speedup` over eager when the study judged it correct.

One row per task; a second row for a task is an error. A row's claims map each
baseline to the claimed speedup (None: the corpus claims nothing for it). The
candidate's response record carries them (`meta.corpus`: file and line, claims,
claimed tolerance, the corpus's reference), so the report reads the claim
judged from the cell's own files.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from kernelsweep.models.base import Backend, Completion, ModelSetupError
from kernelsweep.models.messages import validate_messages

FORMATS = ("cuda-l1", "jsonl", "replay")
# The baselines a claim can name: eager PyTorch, torch.compile in two modes, a
# CUDA-graph replay of the reference, the reference under cuDNN benchmark mode.
BASELINES = ("eager", "torch.compile-default", "torch.compile-reduce-overhead", "cuda-graph", "cudnn-benchmark")
# The baseline mode (evaluator settings.BASELINE_MODES) that measures each baseline a claim names:
# the one map between the two namings.
MEASURED_BY = {"eager": "eager", "torch.compile-default": "inductor-default",
               "torch.compile-reduce-overhead": "inductor-reduce-overhead", "cuda-graph": "cuda-graph",
               "cudnn-benchmark": "cudnn-benchmark"}
CUDA_L1_SCORES = {"score_default": "eager", "score_torch_compile_default": "torch.compile-default",
                  "score_torch_compile_reduce_overhead": "torch.compile-reduce-overhead",
                  "score_cuda_graph": "cuda-graph", "score_cudnn": "cudnn-benchmark"}
CUDA_L1_TOLERANCE = 1e-2  # atol = rtol, CUDA-L1's README
_TASK = re.compile(r"L(\d+)-(\d+)")


class CorpusError(ModelSetupError):
    """A corpus file that cannot be read as its format says (names file and line)."""


@dataclass(frozen=True)
class Row:
    """One published candidate and what was claimed for it."""

    task: str  # L{level}-{id:03d}
    code: str | None  # None or blank: nothing published (a no_code cell)
    claims: dict[str, float | None]  # baseline -> claimed speedup (None: not claimed)
    atol: float | None  # the tolerance the claim was made at (None: not stated)
    rtol: float | None
    ref_code: str | None  # the reference the corpus measured against, when it ships one
    where: str  # file:line
    text: str | None = None  # the raw response to extract (replay format), instead of `code`

    @property
    def level(self) -> int:
        return int(_TASK.fullmatch(self.task).group(1))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def task_id(level: Any, number: Any) -> str:
    return f"L{int(level)}-{int(number):03d}"


def _speedup(value: Any, where: str, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise CorpusError(f"{where}: '{name}' must be a positive number or null, got {value!r}")
    return float(value)


def _lines(path: Path) -> Iterator[tuple[str, dict]]:
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise CorpusError(f"{where}: not JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise CorpusError(f"{where}: not a JSON object")
        yield where, row


def _code(value: Any, where: str, name: str) -> str | None:
    if value is not None and not isinstance(value, str):
        raise CorpusError(f"{where}: '{name}' must be a string or null, got {type(value).__name__}")
    return value


def _cuda_l1(where: str, row: dict) -> Row:
    try:
        task = task_id(row["level_id"], row["task_id"])
    except (KeyError, TypeError, ValueError) as e:
        raise CorpusError(f"{where}: not a CUDA-L1 row (level_id and task_id: {type(e).__name__}: {e})") from e
    claims = {baseline: _speedup(row.get(key), where, key) for key, baseline in CUDA_L1_SCORES.items()}
    return Row(task=task, code=_code(row.get("custom_code"), where, "custom_code"), claims=claims,
               atol=CUDA_L1_TOLERANCE, rtol=CUDA_L1_TOLERANCE, ref_code=_code(row.get("ref_code"), where, "ref_code"),
               where=where)


def _tolerance(row: dict, key: str, where: str) -> float | None:
    value = row.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise CorpusError(f"{where}: '{key}' must be a number >= 0 or null, got {value!r}")
    return float(value)


def _jsonl(where: str, row: dict) -> Row:
    if isinstance(row.get("task"), str) and _TASK.fullmatch(row["task"].strip()):
        task = task_id(*_TASK.fullmatch(row["task"].strip()).groups())
    elif "level" in row and "task_id" in row:
        try:
            task = task_id(row["level"], row["task_id"])
        except (TypeError, ValueError) as e:
            raise CorpusError(f"{where}: level and task_id must be integers ({e})") from e
    else:
        raise CorpusError(f"{where}: needs 'task' (e.g. L1-001) or 'level' and 'task_id'")
    claims: dict[str, float | None] = dict.fromkeys(BASELINES)
    given = row.get("claims")
    if given is not None:
        if not isinstance(given, dict):
            raise CorpusError(f"{where}: 'claims' must be an object {{baseline: speedup}}")
        for baseline, value in given.items():
            if baseline not in BASELINES:
                raise CorpusError(f"{where}: unknown baseline '{baseline}' in 'claims' (known: {', '.join(BASELINES)})")
            claims[baseline] = _speedup(value, where, f"claims.{baseline}")
    if "claimed_speedup" in row:
        baseline = row.get("baseline", "eager")
        if baseline not in BASELINES:
            raise CorpusError(f"{where}: unknown baseline {baseline!r} (known: {', '.join(BASELINES)})")
        claims[baseline] = _speedup(row["claimed_speedup"], where, "claimed_speedup")
    return Row(task=task, code=_code(row.get("code"), where, "code"), claims=claims,
               atol=_tolerance(row, "atol", where), rtol=_tolerance(row, "rtol", where),
               ref_code=_code(row.get("ref_code"), where, "ref_code"), where=where)


def _replay(path: Path) -> Iterator[Row]:
    chosen: dict[str, tuple[tuple, str, dict]] = {}
    for where, row in _lines(path):
        if row.get("role", "generator") != "generator" or int(row.get("sample", 0)) != 0:
            continue
        if not isinstance(row.get("task"), str) or not isinstance(row.get("raw_response"), str):
            raise CorpusError(f"{where}: a replay record needs 'task' and a string 'raw_response'")
        rank = (row.get("final") is True, int(row.get("turn", 0)), int(row.get("cand", 0)))
        if row["task"] not in chosen or rank > chosen[row["task"]][0]:
            chosen[row["task"]] = (rank, where, row)
    for task, (_, where, row) in chosen.items():
        verdict = row.get("study_verdict") if isinstance(row.get("study_verdict"), dict) else {}
        speedup = verdict.get("speedup") if verdict.get("correct") is True else None
        claims = dict.fromkeys(BASELINES) | {"eager": _speedup(speedup, where, "study_verdict.speedup")}
        yield Row(task=task, code=None, claims=claims, atol=None, rtol=None, ref_code=None, where=where,
                  text=row["raw_response"])


def read(path: str | os.PathLike, fmt: str) -> dict[str, Row]:
    """task -> its row; CorpusError for an unreadable file, a bad row or a task given twice."""
    path = Path(path)
    if fmt not in FORMATS:
        raise CorpusError(f"corpus format must be one of {', '.join(FORMATS)}, got {fmt!r}")
    if path.is_dir():
        raise CorpusError(f"corpus path {path} is a folder; name one .jsonl file of it")
    if not path.is_file():
        raise CorpusError(f"corpus file not found: {path}")
    if fmt == "replay":
        rows: Iterator[Row] = _replay(path)
    else:
        parse = _cuda_l1 if fmt == "cuda-l1" else _jsonl
        rows = (parse(where, row) for where, row in _lines(path))
    out: dict[str, Row] = {}
    for row in rows:
        if row.task in out:
            raise CorpusError(f"{row.where}: a second row for {row.task} (the first: {out[row.task].where})")
        out[row.task] = row
    return out


def as_response(code: str | None) -> str:
    """The code as a response the extractor returns unchanged: one fence longer than
    any backtick run inside it; no code gives an empty response (a no_code candidate)."""
    if code is None or not code.strip():
        return ""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}python\n{code.rstrip()}\n{fence}\n"


@dataclass
class _CorpusFile:
    rows: dict[str, Row]
    digest: str


class CorpusBackend(Backend):
    kind = "corpus"

    def __init__(self, name: str, spec: dict[str, Any]):
        super().__init__(name, spec)
        self.path = Path(os.path.expandvars(spec["path"])).expanduser()
        if not self.path.exists():
            raise ModelSetupError(f"model '{name}': corpus file not found: {self.path}")
        self._corpus: _CorpusFile | None = None

    def _load(self) -> _CorpusFile:
        if self._corpus is None:
            rows = read(self.path, self.spec["format"])
            self._corpus = _CorpusFile(rows, hashlib.sha256(self.path.read_bytes()).hexdigest())
        return self._corpus

    @property
    def model_id(self) -> str:
        return self.spec.get("model_id") or f"corpus:{self.path.name}"

    @property
    def revision(self) -> str | None:
        return None if self._corpus is None else "sha256:" + self._corpus.digest

    def generate(self, messages: list[dict], *, n: int, temperature: float, top_p: float,
                 max_tokens: int, seed: int, key: Mapping[str, Any]) -> list[Completion]:
        validate_messages(messages)
        if n != 1 or int(key.get("turn", 0)) != 0 or key.get("role", "generator") != "generator":
            raise ModelSetupError(f"model '{self.name}': a corpus holds one candidate per task; use it with a "
                                  f"one-turn, one-candidate method (zero_shot), not n={n} turn={key.get('turn')} "
                                  f"role={key.get('role', 'generator')}")
        loaded = self._load()
        row = loaded.rows.get(str(key.get("task")))
        if row is None:
            raise ModelSetupError(f"model '{self.name}': {self.path} has no row for task {key.get('task')} "
                                  f"({len(loaded.rows)} rows); select only the corpus's tasks")
        text = row.text if row.text is not None else as_response(row.code)
        return [Completion(text=text, finish_reason=None, prompt_tokens=None, completion_tokens=None,
                           latency_s=None, request={"messages": messages}, seed=None, index=0,
                           meta={"corpus": {"file": str(self.path), "where": row.where, "format": self.spec["format"],
                                            "baseline": self.spec["baseline"], "claims": row.claims, "atol": row.atol, "rtol": row.rtol,
                                            "ref_code": row.ref_code}})]
