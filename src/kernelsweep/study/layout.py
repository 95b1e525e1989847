"""The run layout: where each file of a study lives under `{results}`
(docs/results.md), the pattern of each path part, and the cell key read back
from a path. The workflow (workflow/rules/common.smk), the stages and the
report spell these paths only through here.

Templates are relative to `{results}` and use the workflow's wildcard names,
so `str.format` fills them in Python and Snakemake fills them in rules.

Precision is a path part of every cell, profile and baseline, also in a study
of one precision: a cell's folder always says what it was evaluated at, and
adding a precision to a study later moves nothing. Results written before
(runs/{model}/…) are found by `kernelsweep.study.relayout` and moved only on request."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from kernelsweep.runtime.taskcode import PRECISIONS
from kernelsweep.tasks.ids import TASK_ID


# Snakemake wildcard constraints of the path parts (model and method: the study's names).
WILDCARDS = {"task": TASK_ID, "sample": r"\d+", "turn": r"\d+", "cand": r"\d+", "device": r"cpu|cuda",
             "precision": "|".join(PRECISIONS)}

TASK = "tasks/{task}.json"
REFERENCE = "tasks/{task}.py"  # the task's code as a module file, what the evaluator and profiler import
# The reference at fp16 is another program than at fp32: profiles and baselines are per precision.
PROFILE = "profile/{device}/{precision}/{task}.json"
BASELINE = "baseline/{device}/{precision}/{task}.json"

RUNS = "runs"
CELL_KEY = "{precision}/{model}/{method}/{task}/s{sample}"  # also the folder of a cell's logs and benchmarks
CELL = f"{RUNS}/{CELL_KEY}"
TURN_DIR = "t{turn}"  # a turn's folder in its cell
CAND_DIR = "c{cand}"  # a candidate's folder in its turn
TURN = f"{CELL}/{TURN_DIR}"
CAND = f"{TURN}/{CAND_DIR}"
# The agentic roles' folders: analyzer and researcher run once per cell, feedback after each turn.
ROLE_DIRS = {"analyzer": CELL + "/roles/analyzer", "researcher": CELL + "/roles/researcher",
             "feedback": TURN + "/feedback"}

PROMPT = "prompt.json"  # in a turn folder (generator) or a role folder
RESPONSE = "response.json"  # in a candidate folder or a role folder
CANDIDATE = "candidate.py"
BUILD = "build.json"
EVAL = "eval.json"
SELECT = "select.json"  # in a turn folder
FINAL = "final.json"  # in a cell folder
REACT_DIR = "react"  # in a react cell's folder: its trajectory (kernelsweep.agent.cell)
REACT_TRACE = f"{REACT_DIR}/trace.jsonl"
CAND_FILES = (RESPONSE, CANDIDATE, BUILD, EVAL)

# Outage records of earlier versions, moved aside (kernelsweep.study.stale): the path they had under {results}.
STALE = "stale"

STUDY_MANIFEST = "report/study.json"
REPORT = "report/REPORT.md"


def figure_stem(name: str, precision: str | None = None) -> str:
    """A report figure's file name without suffix, under report/figures/: one per
    precision (`name-bf16`) in a study of several, else the figure's name."""
    return name if precision is None else f"{name}-{precision}"


# Read back from the templates above, so a path is parsed as it is spelled.
_KEY = re.compile(
    r"^(?P<results>(?:.*/)?)" + RUNS + "/"
    + CELL_KEY.format(precision=f"(?P<precision>{WILDCARDS['precision']})", model=r"(?P<model>[^/]+)",
                      method=r"(?P<method>[^/]+)", task=f"(?P<task>{TASK_ID})", sample=r"(?P<sample>\d+)")
    + "(?:/" + TURN_DIR.format(turn=r"(?P<turn>\d+)") + "(?:/" + CAND_DIR.format(cand=r"(?P<cand>\d+)") + ")?)?(?:/|$)"
)
_NUMBERED = {"turn": re.compile(TURN_DIR.format(turn=r"(\d+)")), "cand": re.compile(CAND_DIR.format(cand=r"(\d+)"))}


@dataclass(frozen=True)
class Key:
    """Where a file sits in the matrix: its cell, and its turn and candidate when it has them.
    (precision last, so that a key built by hand for a test may leave it out.)"""

    model: str
    method: str
    task: str
    sample: int
    turn: int | None = None
    cand: int | None = None
    precision: str | None = None

    def as_dict(self) -> dict[str, str | int]:
        """The key's fields that are set (the `cell` of an eval record)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def key_of(path: str | Path) -> Key:
    """The key of a file or folder under `{results}/runs` (the innermost `runs/` that fits)."""
    m = _KEY.match(Path(path).as_posix())
    if not m:
        raise ValueError(f"{path} is not under {RUNS}/{CELL_KEY}")
    turn, cand = m["turn"], m["cand"]
    return Key(m["model"], m["method"], m["task"], int(m["sample"]),
               None if turn is None else int(turn), None if cand is None else int(cand), m["precision"])


def reference_of(path: str | Path) -> Path:
    """The task reference (REFERENCE) of the cell that holds `path`, in the same `{results}`."""
    m = _KEY.match(Path(path).as_posix())
    if not m:
        raise ValueError(f"{path} is not under {RUNS}/{CELL_KEY}")
    return Path(m["results"] or ".") / REFERENCE.format(task=m["task"])


def task_record_of(reference: str | Path) -> Path:
    """The task's record (TASK) beside its reference module (REFERENCE)."""
    return Path(reference).with_suffix(Path(TASK).suffix)


def cand_file(path: str | Path, name: str) -> Path:
    """The file `name` of the candidate folder that holds `path` (e.g. an eval.json's candidate.py)."""
    if name not in CAND_FILES:
        raise ValueError(f"{name!r} is not a candidate file ({', '.join(CAND_FILES)})")
    return Path(path).with_name(name)


def turn_dir(cell_dir: str | Path, turn: int) -> Path:
    """The folder of turn `turn` in a cell folder."""
    return Path(cell_dir) / TURN_DIR.format(turn=turn)


def cand_dir(cell_dir: str | Path, turn: int, cand: int) -> Path:
    """The folder of candidate `cand` of turn `turn` in a cell folder."""
    return turn_dir(cell_dir, turn) / CAND_DIR.format(cand=cand)


def numbered(folder: Path, part: str) -> list[tuple[int, Path]]:
    """The turn (`part="turn"`: t0, t1, …) or candidate (`"cand"`) folders in `folder`, in order."""
    pattern = _NUMBERED[part]
    if not folder.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if p.is_dir() and (m := pattern.fullmatch(p.name)))
