"""Published vs re-measured: a replayed study's own verdicts beside this evaluator's.

A model with `backend: replay` replays recorded responses (kernelsweep.models.replay).
When those records also carry the verdicts the publishing study gave them, the
report sets the two side by side, per method, and lists every cell where they
disagree with the reason. The contract (docs/results.md, "Published verdicts"):

- A replay record carries a published verdict when it has a `study_verdict`
  object with `compiled` (bool or null), `correct` (bool), and optionally
  `speedup` (number or null: the study's own speedup over its baseline),
  `faster` (bool) and `category` (the study's label, shown as given).
- The study's "faster": `study_verdict.faster` when present; otherwise correct and
  `speedup >= FASTER_AT` (1.0), the rule of the published tables this was made
  for (their label "correct" vs "slow" splits at exactly 1.0, ties included).
- Which record the study submitted for a (task, sample): the one with
  `final: true`; when none of them says, the last turn (then the last cand).
  Keys as the replay backend reads them: `task`, `sample` (0), `turn`, `cand`
  (0), `role` ("generator"; other roles carry no verdict).
- The file: the one the replay backend reads for the method (the model's `path`
  if it is a file, else `<path>/<method or model's method>.jsonl`); relative paths
  resolve against the current folder (the workflow runs in the repository
  root), then the repository root.

A study whose replay records carry no `study_verdict` gets no such section.
Measured side: the cell's final result, as in every other table (collect)."""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from kernelsweep.report import aggregate
from kernelsweep.report.aggregate import flag, with_result
from kernelsweep.report.baselines import BEST_COMPILE
from kernelsweep.report.collect import Collection
from kernelsweep.report.tables import NA, Part, Table, fmt_pct

VERDICT_KEY = "study_verdict"
FASTER_AT = 1.0


@dataclass(frozen=True)
class Published:
    """The verdict a study published for the record it submitted in one cell."""

    task: str
    sample: int
    turn: int
    cand: int
    compiled: bool | None
    correct: bool
    faster: bool
    speedup: float | None
    category: str | None
    where: str  # file:line


@dataclass
class PublishedSet:
    verdicts: dict[tuple[str, str, str, int], Published]  # (model, method, task, sample) -> the submitted one
    sources: dict[tuple[str, str], str]  # (model, method) -> the file read
    notes: list[str] = field(default_factory=list)  # records left out, files not found


def _resolve(path: str, base: Path | None) -> Path:
    """As the replay backend finds it (models.replay.resolve_path), the study's
    folder `base` tried first."""
    from kernelsweep.models.replay import resolve_path
    from kernelsweep.study.matrix import REPO_ROOT

    p = Path(os.path.expanduser(os.path.expandvars(path)))
    if base and not p.is_absolute() and (base / p).exists():
        return base / p
    found = resolve_path(path, REPO_ROOT)
    return found if found.is_absolute() else (base or Path.cwd()) / p


def replay_file(model: Mapping[str, Any], method: str, base: Path | None = None) -> Path | None:
    """The file the replay backend reads for `method`, or None for another backend."""
    if model.get("backend") != "replay" or not model.get("path"):
        return None
    root = _resolve(str(model["path"]), base)
    return root if root.is_file() else root / f"{model.get('method') or method}.jsonl"


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) or value is None else None


def parse_verdict(row: Mapping[str, Any], where: str) -> Published | str:
    """A record's published verdict, or why it is left out (a message)."""
    v = row.get(VERDICT_KEY)
    if not isinstance(v, Mapping):
        return f"{where}: '{VERDICT_KEY}' is not an object; left out"
    if not isinstance(v.get("correct"), bool) or ("compiled" in v and not isinstance(v["compiled"], (bool, type(None)))):
        return f"{where}: '{VERDICT_KEY}' needs a boolean 'correct' (and 'compiled' boolean or null); left out"
    speedup = v.get("speedup")
    if speedup is not None and (isinstance(speedup, bool) or not isinstance(speedup, (int, float))
                                or not math.isfinite(speedup)):
        return f"{where}: '{VERDICT_KEY}.speedup' is not a number; left out"
    if "faster" in v and not isinstance(v["faster"], bool):
        return f"{where}: '{VERDICT_KEY}.faster' is not a boolean; left out"
    faster = v["faster"] if "faster" in v else bool(v["correct"] and speedup is not None and speedup >= FASTER_AT)
    try:
        task, sample, turn, cand = str(row["task"]), int(row.get("sample", 0)), int(row["turn"]), int(row.get("cand", 0))
    except (KeyError, TypeError, ValueError) as e:
        return f"{where}: not a replay record ({type(e).__name__}: {e}); left out"
    return Published(task=task, sample=sample, turn=turn, cand=cand, compiled=_bool(v.get("compiled")),
                     correct=v["correct"], faster=bool(faster) and v["correct"],
                     speedup=None if speedup is None else float(speedup),
                     category=None if v.get("category") is None else str(v["category"]), where=where)


def read_file(path: Path) -> tuple[dict[tuple[str, int], Published], list[str]]:
    """(task, sample) -> the submitted record's published verdict, and notes on what was left out."""
    by_cell: dict[tuple[str, int], list[tuple[bool, Published]]] = {}
    notes: list[str] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path.name}:{lineno}"
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            notes.append(f"{where}: not JSON ({e.msg}); left out")
            continue
        if not isinstance(row, dict) or VERDICT_KEY not in row or row.get("role", "generator") != "generator":
            continue
        parsed = parse_verdict(row, where)
        if isinstance(parsed, str):
            notes.append(parsed)
            continue
        by_cell.setdefault((parsed.task, parsed.sample), []).append((row.get("final") is True, parsed))
    chosen = {}
    for key, entries in by_cell.items():
        finals = [p for is_final, p in entries if is_final]
        if len(finals) > 1:
            notes.append(f"{path.name}: {key[0]} s{key[1]} has {len(finals)} records marked final; the last turn "
                         "of them is taken")
        pool = finals or [p for _, p in entries]
        chosen[key] = max(pool, key=lambda p: (p.turn, p.cand))
    return chosen, notes


def load(collection: Collection, base: Path | None = None) -> PublishedSet | None:
    """The published verdicts of every replayed (model, method) of the study, or None
    when no replay record carries one."""
    spec = collection.spec
    verdicts: dict[tuple[str, str, str, int], Published] = {}
    sources: dict[tuple[str, str], str] = {}
    notes: list[str] = []
    cells = {(t.id, s) for t in spec.tasks for s in range(spec.samples)}
    for model, model_spec in spec.models.items():
        for method in spec.methods:
            path = replay_file(model_spec, method, base)
            if path is None:
                continue
            if not path.is_file():
                notes.append(f"{model}/{method}: replay file {path} not found here; no published verdicts read")
                continue
            chosen, file_notes = read_file(path)
            notes += [f"{model}/{method}: {n}" for n in file_notes]
            if not chosen:
                continue
            sources[model, method] = str(path)
            for (task, sample), published in chosen.items():
                if (task, sample) in cells:
                    verdicts[model, method, task, sample] = published
    if not verdicts:
        return None
    return PublishedSet(verdicts, sources, notes)


# --- the comparison ----------------------------------------------------------

def _na(value: Any) -> bool:
    return value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value))


def _true(value: Any) -> bool:
    return False if _na(value) else bool(value)


def measured_faster(cell: Mapping[str, Any], against: str = "eager") -> bool:
    """Numerically correct (plain PyTorch included) and the whole speedup interval above 1 + margin."""
    return _true(cell.get("correct")) and cell.get(f"verdict_{against}") == "faster"


def _speed(cell: Mapping[str, Any], against: str = "eager") -> str:
    s, lo, hi = (cell.get(f"speedup_{against}{k}") for k in ("", "_lo", "_hi"))
    if _na(s):
        return "untimed"
    return f"{s:.3f}×" + ("" if _na(lo) or _na(hi) else f" [{lo:.3f}, {hi:.3f}]")


def reasons(published: Published, cell: Mapping[str, Any], margin: float) -> list[str]:
    """Why the measured cell disagrees with the published verdict (empty: they agree)."""
    if not _true(cell.get("has_result")):
        return [f"published {'correct' if published.correct else published.category or 'not correct'}, "
                f"no result here ({cell.get('status')})"]
    category = cell.get("category")
    compiled, correct = _true(cell.get("compiled")), _true(cell.get("correct"))
    pct = f"{100 * margin:g} %"
    out = []
    if published.correct and not correct:
        out.append(f"published correct, here {category}")
    elif published.compiled is True and not compiled:
        # NA: no custom extension to build (plain PyTorch, or code that failed before any build)
        out.append(f"published compiled, here {category}" + (" (nothing built: no custom extension)"
                                                             if _na(cell.get("compiled")) else ""))
    elif published.compiled is False and compiled:
        out.append(f"published not compiled ({published.category or 'no label'}), here compiled ({category})")
    if not published.correct and correct:
        out.append(f"published {published.category or 'not correct'}, here correct ({category})")
    if published.correct and correct and not _true(cell.get("custom_kernel")):
        out.append("correct, but no custom kernel (plain PyTorch)")
    faster_here = measured_faster(cell)
    if published.faster and correct and not faster_here:
        claim = "published faster" + ("" if published.speedup is None else f" ({published.speedup:.3f}×")
        if published.speedup is not None:
            claim += f", itself within the {pct} margin)" if published.speedup < 1 + margin else ")"
        verdict = cell.get("verdict_eager")
        if verdict == "tie":
            out.append(f"{claim}; here {_speed(cell)}, a tie within the {pct} margin")
        elif verdict == "slower":
            out.append(f"{claim}; here slower, {_speed(cell)}")
        else:
            out.append(f"{claim}; here " + (f"{verdict} ({_speed(cell)})" if verdict else
                                            "untimed" if _na(cell.get("speedup_eager"))
                                            else f"{_speed(cell)} without a timing verdict"))
    elif not published.faster and faster_here:
        was = "not faster" if published.speedup is None else f"{published.speedup:.3f}×, not faster"
        out.append(f"published {was}; here faster, {_speed(cell)}")
    return out


def _published_frame(cells: pd.DataFrame, published: PublishedSet) -> pd.DataFrame:
    """One row per cell with a published verdict: both sides and the reasons."""
    rows = []
    for cell in cells.to_dict("records"):
        p = published.verdicts.get((cell["model"], cell["method"], cell["task"], int(cell["sample"])))
        if p is None:
            continue
        rows.append(cell | {"published_turn": p.turn, "published_cand": p.cand, "published_compiled": p.compiled,
                            "published_correct": p.correct, "published_faster": p.faster,
                            "published_speedup": p.speedup, "published_category": p.category,
                            "published_where": p.where})
    return pd.DataFrame(rows)


def _count(frame: pd.DataFrame, indicator: pd.Series) -> str:
    """'k (pct [lo, hi] %)': a count, its rate and the report's 95% interval over tasks (report.stats)."""
    if frame.empty:
        return NA
    estimate = aggregate.rate(frame, indicator)
    scale = lambda v: None if v is None else 100.0 * v  # noqa: E731
    return f"{int(indicator.sum())} ({fmt_pct(scale(estimate.value), scale(estimate.lo), scale(estimate.hi))} %)"


def _estimate(frame: pd.DataFrame, indicator: pd.Series, name: str) -> dict[str, Any]:
    e = aggregate.rate(frame, indicator) if not frame.empty else None
    scale = lambda v: None if v is None else 100.0 * v  # noqa: E731
    return {f"{name}": int(indicator.sum()), f"{name}_pct": scale(e.value) if e else None,
            f"{name}_lo": scale(e.lo) if e else None, f"{name}_hi": scale(e.hi) if e else None}


def tables(collection: Collection, published: PublishedSet | None) -> list[Table]:
    """The summary per method and the per-cell disagreements; [] without published verdicts."""
    if published is None:
        return []
    spec = collection.spec
    margin = spec.equivalence_margin
    cells = collection.cells
    frame = _published_frame(cells, published)
    summary_rows, summary_view, disagreements, per_cell = [], [], [], []
    for model in spec.models:
        for method in spec.methods:
            if (model, method) not in published.sources:
                continue
            mine = frame[(frame["model"] == model) & (frame["method"] == method)] if not frame.empty else frame
            if mine.empty:
                continue
            both = with_result(mine)
            indicators = {
                "published_compiled": both["published_compiled"].map(_true),
                "published_correct": both["published_correct"].map(_true),
                "published_faster": both["published_faster"].map(_true),
                "compiled": flag(both, "compiled"),
                "correct": flag(both, "correct"),
                "kernel_success": flag(both, "kernel_success"),
                "faster_eager": pd.Series([measured_faster(r) for r in both.to_dict("records")], index=both.index,
                                          dtype=bool),
            }
            compile_base = both[both["compile_baseline"].fillna(False).astype(bool)]
            faster_compile = pd.Series([measured_faster(r, BEST_COMPILE) for r in compile_base.to_dict("records")],
                                       index=compile_base.index, dtype=bool)
            cell_reasons = {i: reasons(published.verdicts[(r["model"], r["method"], r["task"], int(r["sample"]))],
                                       r, margin) for i, r in mine.to_dict("index").items()}
            agree = sum(1 for i in both.index if not cell_reasons[i])
            row = {"model": model, "method": method, "source": published.sources[model, method],
                   "cells": len(both), "cells_missing_here": len(mine) - len(both), "agree": agree,
                   "compile_cells": len(compile_base)}
            for name, indicator in indicators.items():
                row |= _estimate(both, indicator, name)
            row |= _estimate(compile_base, faster_compile, "faster_compile")
            summary_rows.append(row)
            key = ({"model": model} if len(spec.models) > 1 else {}) | {"method": method}
            summary_view.append(key | {
                "cells": str(len(both)) + (f" ({row['cells_missing_here']} missing here)"
                                           if row["cells_missing_here"] else ""),
                "published compiled": _count(both, indicators["published_compiled"]),
                "published correct": _count(both, indicators["published_correct"]),
                "published faster": _count(both, indicators["published_faster"]),
                "compiled (custom extension built)": _count(both, indicators["compiled"]),
                "correct (incl. plain PyTorch)": _count(both, indicators["correct"]),
                "correct custom kernel (launched)": _count(both, indicators["kernel_success"]),
                "faster than eager": _count(both, indicators["faster_eager"]),
                "faster than torch.compile": (_count(compile_base, faster_compile) + f", n = {len(compile_base)}")
                if len(compile_base) else NA,
                "cells that agree": f"{agree} of {len(both)}",
            })
            for i, r in mine.to_dict("index").items():
                why = cell_reasons[i]
                per_cell.append({k: r.get(k) for k in ("model", "method", "task", "level", "sample", "status",
                                                       "category", "best_turn", "compiled", "correct",
                                                       "custom_kernel", "speedup_eager", "speedup_eager_lo",
                                                       "speedup_eager_hi", "verdict_eager", "speedup_compile",
                                                       "verdict_compile")}
                                | {k: r[k] for k in r if k.startswith("published_")}
                                | {"faster_eager_here": measured_faster(r), "agree": not why,
                                   "reasons": "; ".join(why)})
                if why:
                    disagreements.append(key | {
                        "task": r["task"] + ("" if spec.samples == 1 else f" s{r['sample']}"),
                        "published (turn)": _published_text(published.verdicts[(r["model"], r["method"], r["task"],
                                                                                  int(r["sample"]))]),
                        "here (best turn)": _here_text(r),
                        "why they differ": "; ".join(why)})
    note = " ".join([
        "The study's own verdicts, as recorded with its responses (the replay records' "
        f"'{VERDICT_KEY}', for the record it submitted per cell), beside this evaluator's verdict of the cell's "
        "final candidate. n = cells with both a published verdict and a final result here; counts with the "
        "percentage and its 95% bootstrap interval over tasks.",
        "The study's 'compiled' is its own flag (often: the module imported and ran); here 'compiled' means a "
        "custom extension was built and loaded, so plain PyTorch, with nothing to build, is not compiled here.",
        f"The study's 'faster' is its own flag, or correct with a speedup of at least {FASTER_AT:g} over its "
        "baseline (on its hardware), so a tie counts; here 'faster' needs the speedup's whole 95% interval above "
        f"1 + m (m = {margin:g}, the equivalence margin), for any numerically correct candidate (plain PyTorch included); "
        "'correct custom kernel' needs a custom kernel defined and launched. Against torch.compile: the fastest "
        "mode per task, only tasks with a compile baseline.",
        "Sources: " + "; ".join(f"{m}/{meth}: `{s}`" for (m, meth), s in published.sources.items()) + ".",
    ])
    summary = Table("published", "Published vs re-measured", note, pd.DataFrame(summary_rows),
                    [Part(None, pd.DataFrame(summary_view), "no cell has both a published verdict and a result")])
    cell_note = ("Every cell where the published verdict and this evaluator's disagree, with the reason: a "
                 "published 'correct' that is plain PyTorch here (no custom kernel launched); a published "
                 "'faster' that is a tie or slower here (speedup over eager PyTorch with its 95% interval); a "
                 "published verdict the evaluator does not reproduce (its category here). The published side is "
                 "the record the study submitted (its turn), this side the cell's best candidate (its turn). "
                 "The CSV holds every cell, agreeing ones included.")
    parts = [Part(None, pd.DataFrame(disagreements), "the published verdicts and this evaluator's agree on every cell")]
    if published.notes:
        parts.append(Part("Records left out", pd.DataFrame({"note": published.notes})))
    return [summary, Table("published_cells", "Published vs re-measured: disagreements per cell", cell_note,
                           pd.DataFrame(per_cell), parts)]


def _published_text(p: Published) -> str:
    if p.correct:
        text = "correct" + (" faster" if p.faster else "")
        if p.speedup is not None:
            text += f" {p.speedup:.3f}×"
    else:
        text = p.category or ("compiled, not correct" if p.compiled else "not compiled")
    if p.category and p.correct:
        text += f" ('{p.category}')"
    return f"{text} (t{p.turn})"


def _here_text(cell: Mapping[str, Any]) -> str:
    if not _true(cell.get("has_result")):
        return str(cell.get("status"))
    text = str(cell.get("category"))
    if _true(cell.get("correct")):
        text += f" {_speed(cell)}"
    turn = cell.get("best_turn")
    return text + ("" if _na(turn) else f" (t{int(turn)})")
