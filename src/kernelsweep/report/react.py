"""The failure study's analysis over the recorded react trajectories of a study:
success vs number of submissions, tokens of successes vs failures, the speedup
CDF of successes, per-model success (thinking or not), tool adoption, guard
firings, and the "broken record" detector. Reads only final.json and
react/trace.jsonl of each react cell; writes tables (markdown + CSV), figures,
one HTML page per trajectory and an index, and returns the REPORT.md section.

Success is the seed study's: the cell's result compiled and is correct with a
custom kernel (kernelsweep.core.verdict.SUCCESS_CATEGORIES), with no speedup required."""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pandas as pd

from kernelsweep.study import layout
from kernelsweep.core import react_trace as trace
from kernelsweep.core.fileio import read_json, write_atomic
from kernelsweep.report.trajectory_page import render_html
from kernelsweep.core.verdict import SUCCESS_CATEGORIES

BROKEN_RECORD_MIN = 3          # the same failing line or error in this many failed attempts
SUBMISSION_BINS = [(0, 0, "0"), (1, 1, "1"), (2, 2, "2"), (3, 4, "3-4"), (5, 7, "5-7"), (8, 10**9, "8+")]
_SOURCE_LINE = re.compile(r"^\s*\d+\s*\|\s*(\S.*?)\s*$", re.MULTILINE)  # gcc/nvcc echo of the failing line
GUARDS = ("repeat_error", "force_profile", "regression_lock", "max_submissions")
TOOLS = ("write_file", "edit_file", "view_file", "run", "evaluate", "profile", "search_docs", "submit")


def react_methods(methods: dict[str, dict[str, Any]]) -> list[str]:
    return [name for name, m in methods.items() if m.get("strategy") == "react"]


def broken_record(tools: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The failing source line or normalised error most repeated across failed
    attempts (evaluate/submit), when it recurs at least BROKEN_RECORD_MIN times."""
    lines, errors = Counter(), Counter()
    for r in tools:
        result = (r.get("data") or {}).get("eval")
        if r["name"] not in ("evaluate", "submit") or result is None or r.get("ok"):
            continue
        message = str((result.get("error") or {}).get("message") or "")
        lines.update(set(_SOURCE_LINE.findall(message)))
        if r.get("error_key"):
            errors[r["error_key"]] += 1
    for kind, counter in (("line", lines), ("error", errors)):
        if counter:
            item, count = counter.most_common(1)[0]
            if count >= BROKEN_RECORD_MIN:
                return {"kind": kind, "item": item, "count": count}
    return None


def cell_row(final: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    models = [r for r in records if r["kind"] == "model"]
    tools = [r for r in records if r["kind"] == "tool"]
    guards = Counter(r["guard"] for r in records if r["kind"] == "guard")
    result = final.get("result") or {}
    profiles = [r for r in tools if r["name"] == "profile" and r.get("ok")]
    br = broken_record(tools)
    row = {
        "model": final["model"], "method": final["method"], "task": final["task"], "sample": final["sample"],
        "success": result.get("category") in SUCCESS_CATEGORIES,
        "category": result.get("category") or final.get("status"),
        "speedup": result.get("speedup") if result.get("category") in SUCCESS_CATEGORIES else None,
        "submissions": sum(1 for r in tools if r["name"] == "submit" and (r.get("data") or {}).get("eval")),
        "steps": len(models),
        "tokens": sum(int((m.get("usage") or {}).get("prompt_tokens") or 0)
                      + int((m.get("usage") or {}).get("completion_tokens") or 0) for m in models),
        "reasoning_calls": sum(1 for m in models if m.get("reasoning")),
        "profiled": bool(profiles),
        "first_profile_step": profiles[0]["step"] if profiles else None,
        "stop_reason": final.get("stop_reason"),
        "broken_record": br["item"] if br else None,
        "broken_record_count": br["count"] if br else None,
    }
    row.update({f"used_{t}": sum(1 for r in tools if r["name"] == t) for t in TOOLS})
    row.update({f"guard_{g}": guards.get(g, 0) for g in GUARDS})
    return row


def collect(results: Path, models: list[str], methods: list[str], tasks: list[str], samples: int,
            pages: Path | None = None, precision: str = "fp32") -> pd.DataFrame:
    """One row per finished react cell at `precision`; with `pages`, each trajectory's HTML page is written there."""
    rows = []
    for model in models:
        for method in methods:
            for task in tasks:
                for s in range(samples):
                    where = layout.CELL_KEY.format(precision=precision, model=model, method=method, task=task,
                                                   sample=s)
                    cell = results / layout.RUNS / where
                    if not (cell / layout.FINAL).exists() or not (cell / layout.REACT_TRACE).exists():
                        continue
                    records = trace.load(cell / layout.REACT_TRACE)
                    row = cell_row(read_json(cell / layout.FINAL), records)
                    if pages is not None:
                        page = Path(f"{where}.html")
                        write_atomic(pages / page, render_html(records))
                        row["page"] = page.as_posix()
                    rows.append(row)
    return pd.DataFrame(rows)


# -- tables ---------------------------------------------------------------------

def success_by_submissions(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for method, group in cells.groupby("method", sort=True):
        for lo, hi, label in SUBMISSION_BINS:
            sub = group[(group.submissions >= lo) & (group.submissions <= hi)]
            if len(sub):
                rows.append({"method": method, "submissions": label, "cells": len(sub),
                             "successes": int(sub.success.sum()), "success_rate": round(sub.success.mean(), 3)})
    return pd.DataFrame(rows)


def tokens_by_outcome(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for (method, success), group in cells.groupby(["method", "success"], sort=True):
        rows.append({"method": method, "outcome": "success" if success else "failure", "cells": len(group),
                     "median_tokens": int(group.tokens.median()), "mean_tokens": int(group.tokens.mean()),
                     "max_tokens": int(group.tokens.max())})
    return pd.DataFrame(rows)


def per_model(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for model, group in cells.groupby("model", sort=True):
        thinking = group.reasoning_calls.sum() > 0
        rows.append({"model": model, "thinking": "yes" if thinking else "no", "cells": len(group),
                     "successes": int(group.success.sum()), "success_rate": round(group.success.mean(), 3)})
    return pd.DataFrame(rows)


def tool_adoption(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for method, group in cells.groupby("method", sort=True):
        row = {"method": method, "cells": len(group)}
        row.update({t: round(float((group[f"used_{t}"] > 0).mean()), 3) for t in TOOLS})
        row["median_first_profile_step"] = group.first_profile_step.dropna().median() \
            if group.profiled.any() else None
        rows.append(row)
    return pd.DataFrame(rows)


def guard_firings(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for method, group in cells.groupby("method", sort=True):
        for g in GUARDS:
            col = group[f"guard_{g}"]
            rows.append({"method": method, "guard": g, "firings": int(col.sum()), "cells": int((col > 0).sum()),
                         "of_cells": len(group)})
    return pd.DataFrame(rows)


def speedup_quantiles(cells: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for method, group in cells[cells.success].groupby("method", sort=True):
        s = group.speedup.dropna()
        if len(s):
            rows.append({"method": method, "successes": len(s), "p10": round(s.quantile(.1), 3),
                         "median": round(s.median(), 3), "p90": round(s.quantile(.9), 3),
                         "share_below_1.5x": round(float((s < 1.5).mean()), 3)})
    return pd.DataFrame(rows)


def _figures(cells: pd.DataFrame, folder: Path) -> list[str]:
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from kernelsweep.report.figures import save_figure

    matplotlib.rcParams["svg.hashsalt"] = "kernelsweep"
    names = []
    fig = Figure(figsize=(6, 3.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    table = success_by_submissions(cells)
    labels = [b[2] for b in SUBMISSION_BINS]
    for method, group in table.groupby("method", sort=True):
        xs = [labels.index(x) for x in group.submissions]
        ax.plot(xs, group.success_rate, marker="o", label=method)
        for x, y, n in zip(xs, group.success_rate, group.cells):
            ax.annotate(f"n={n}", (x, y), fontsize=6, textcoords="offset points", xytext=(0, 4))
    ax.set_xticks(range(len(labels)), labels)
    ax.set_xlabel("submissions in the trajectory")
    ax.set_ylabel("success rate")
    ax.set_ylim(-0.05, 1.1)
    ax.legend(fontsize=6)
    save_figure(fig, folder, "react_success_vs_submissions")
    names.append("react_success_vs_submissions")

    fig = Figure(figsize=(6, 3.2))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for method, group in cells[cells.success].groupby("method", sort=True):
        s = sorted(group.speedup.dropna())
        if s:
            ax.step(s, [(i + 1) / len(s) for i in range(len(s))], where="post", label=f"{method} (n={len(s)})")
    ax.set_xlabel("speedup of successes over eager PyTorch")
    ax.set_ylabel("fraction of successes")
    if ax.has_data():
        ax.legend(fontsize=6)
    save_figure(fig, folder, "react_speedup_cdf")
    names.append("react_speedup_cdf")
    return names


def _markdown(frame: pd.DataFrame) -> str:
    if frame.empty:
        return "(no cells)"
    return frame.to_markdown(index=False)


def build(results: Path, out: Path, models: list[str], methods: dict[str, dict[str, Any]], tasks: list[str],
          samples: int, precisions: list[str] | tuple[str, ...] = ("fp32",)) -> str:
    """Write report/react/… (report/react/{precision}/… in a study of several precisions)
    and return the REPORT.md section ('' without react methods)."""
    names = react_methods(methods)
    if not names:
        return ""
    several = len(precisions) > 1
    lines = ["## react: the tool-using agent", ""]
    for precision in precisions:
        where = f"react/{precision}" if several else "react"
        cells = collect(results, models, names, tasks, samples, pages=out / where / "trajectories", precision=precision)
        lines += ([f"### {precision}", ""] if several else []) + _section(cells, out, where, "####" if several else "###")
    return "\n".join(lines)


def _section(cells: pd.DataFrame, out: Path, where: str, heading: str) -> list[str]:
    """One precision's react tables and figures, written under out/where."""
    if cells.empty:
        return ["No react cell has finished yet.", ""]
    folder = out / where
    tables = {"success_by_submissions": success_by_submissions(cells), "tokens_by_outcome": tokens_by_outcome(cells),
              "speedup_of_successes": speedup_quantiles(cells), "per_model": per_model(cells),
              "tool_adoption": tool_adoption(cells), "guard_firings": guard_firings(cells)}
    write_atomic(folder / "cells.csv", cells.to_csv(index=False))
    lines = [f"{len(cells)} finished react cells. Success: the result compiled and is correct with a custom "
             f"kernel (no speedup required), as in the failure study. Trajectories: `{where}/index.html`.", ""]
    for name, frame in tables.items():
        write_atomic(folder / f"{name}.csv", frame.to_csv(index=False))
        lines += [f"{heading} {name.replace('_', ' ')}", "", _markdown(frame), ""]
    flagged = cells[cells.broken_record.notna()]
    lines += [f"{heading} broken record (the same failing line or error in ≥ {BROKEN_RECORD_MIN} failed attempts)", ""]
    lines += [_markdown(flagged[["model", "method", "task", "sample", "broken_record", "broken_record_count",
                                 "stop_reason"]]) if len(flagged) else "No cell flagged.", ""]
    for name in _figures(cells, folder / "figures"):
        lines += [f"![{name}]({where}/figures/{name}.svg)", ""]
    write_atomic(folder / "index.html", _index(cells))
    return lines


def _index(cells: pd.DataFrame) -> str:
    rows = "".join(
        f"<tr><td><a href='trajectories/{html.escape(r.page)}'>{html.escape(f'{r.model}/{r.method}/{r.task}/s{r.sample}')}"
        f"</a></td><td>{html.escape(str(r.category))}</td><td>{r.submissions}</td><td>{r.steps}</td>"
        f"<td>{r.tokens}</td><td>{html.escape(str(r.stop_reason))}</td></tr>"
        for r in cells.itertuples())
    return ("<!doctype html><html><head><meta charset='utf-8'><title>react trajectories</title></head><body>"
            "<h1>react trajectories</h1><table border=1 cellpadding=4><tr><th>cell</th><th>result</th>"
            "<th>submissions</th><th>steps</th><th>tokens</th><th>end</th></tr>"
            f"{rows}</table></body></html>\n")
