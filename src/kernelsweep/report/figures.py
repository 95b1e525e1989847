"""The study's figures (matplotlib, Agg, PNG and SVG). Every figure renders for
empty or tiny data and then says "no data"; none computes a number itself: they
draw the tables' numbers or the tidy cell and candidate tables."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import matplotlib
import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from kernelsweep.report.aggregate import flag, groups, with_result
from kernelsweep.report.spec import StudySpec

FORMATS = ("png", "svg")
# Fixed ids and no timestamp: the same results give byte-identical SVGs.
RC = {"svg.hashsalt": "kernelsweep", "svg.fonttype": "none", "font.size": 9}  # text stays text in SVG


def _figure(width: float = 6.4, height: float = 4.0) -> tuple[Figure, object]:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _no_data(ax, title: str) -> None:
    ax.set_title(title)
    ax.text(0.5, 0.5, "no data", ha="center", va="center", fontsize=14, color="0.4", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])


def _label(spec: StudySpec, model: str, method: str) -> str:
    return f"{spec.model_label(model)}/{method}" if len(spec.models) > 1 else method


def _errors(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    value, lo, hi = (frame[f"{name}_{k}"].astype(float).to_numpy() for k in ("pct", "lo", "hi"))
    if np.isnan(lo).all():
        return None
    return np.vstack([np.nan_to_num(value - lo), np.nan_to_num(hi - value)])


def best_of_n(data: pd.DataFrame, spec: StudySpec) -> Figure:
    fig, ax = _figure()
    title = "Best-of-n scaling"
    if data.empty or int(data["cells_with_result"].sum()) == 0:
        _no_data(ax, title)
        return fig
    for model, frame in data.groupby("model", sort=False):
        frame = frame.sort_values("n")
        prefix = f"{spec.model_label(model)}: " if len(spec.models) > 1 else ""
        for name, label, marker in (("kernel_success", "correct custom kernel", "o"),
                                    ("fast_1_eager", "fast_1 vs eager", "s"),
                                    ("fast_1_compile", "fast_1 vs torch.compile", "^")):
            ax.errorbar(frame["n"], frame[f"{name}_pct"].astype(float), yerr=_errors(frame, name), marker=marker,
                        capsize=3, label=prefix + label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted(data["n"].unique()), [str(n) for n in sorted(data["n"].unique())])
    ax.set_xlabel("candidates per turn (n)")
    ax.set_ylabel("% of cells (95% CI over tasks)")
    ax.set_ylim(-2, 102)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return fig


def speedup_cdf(cells: pd.DataFrame, spec: StudySpec) -> Figure:
    fig, ax = _figure()
    title = "Speedup over eager of correct custom kernels"
    drawn = False
    for model, method, group in groups(with_result(cells), spec):
        values = group.loc[flag(group, "kernel_success"), "speedup_eager"].dropna().astype(float)
        values = np.sort(values[values > 0].to_numpy())
        if values.size == 0:
            continue
        fraction = np.arange(1, values.size + 1) / values.size
        ax.step(np.concatenate([[values[0]], values]), np.concatenate([[0.0], fraction]), where="post",
                label=f"{_label(spec, model, method)} (n={values.size})")
        drawn = True
    if not drawn:
        _no_data(ax, title)
        return fig
    ax.axvline(1.0, color="0.5", linestyle="--", linewidth=1)
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("speedup over eager, final result per cell (log scale; 1 = parity)")
    ax.set_ylabel("fraction of correct custom kernels <= x")
    ax.set_ylim(0, 1.02)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return fig


CELL_KEY = ["model", "method", "task", "sample"]


def attempt_table(candidates: pd.DataFrame, cells: pd.DataFrame) -> pd.DataFrame:
    """Per cell with a result: how many candidates were evaluated, and the 1-based
    index (turn by turn, candidate by candidate) of the first one that is a correct
    custom kernel (NaN if none)."""
    counted = with_result(cells)[CELL_KEY]
    evaluated = candidates[flag(candidates, "evaluated")].sort_values(["turn", "candidate"])
    evaluated = evaluated.merge(counted, on=CELL_KEY)
    evaluated["attempt"] = evaluated.groupby(CELL_KEY).cumcount() + 1
    attempts = evaluated.groupby(CELL_KEY)["attempt"].max().rename("attempts")
    first = evaluated[flag(evaluated, "kernel_success")].groupby(CELL_KEY)["attempt"].min().rename("first_success")
    table = counted.set_index(CELL_KEY).join(attempts).join(first)
    return table.astype(float).reset_index()


def success_vs_attempts(candidates: pd.DataFrame, cells: pd.DataFrame, spec: StudySpec) -> Figure:
    fig, ax = _figure()
    title = "Success rate against number of attempts"
    table = attempt_table(candidates, cells)
    drawn = False
    for model, method, group in groups(table, spec):
        if group.empty:
            continue
        k = np.arange(1, int(np.nan_to_num(group["attempts"].max(), nan=1.0)) + 1)
        rate = [100.0 * float((group["first_success"] <= i).sum()) / len(group) for i in k]
        ax.step(k, rate, where="post", marker="o", markersize=3,
                label=f"{_label(spec, model, method)} (n={len(group)})")
        drawn = True
    if not drawn:
        _no_data(ax, title)
        return fig
    ax.set_xlabel("evaluated candidates so far (turn by turn)")
    ax.set_ylabel("% of cells with a correct custom kernel")
    ax.set_ylim(-2, 102)
    ax.xaxis.get_major_locator().set_params(integer=True)
    ax.set_title(title)
    ax.legend(fontsize=7)
    return fig


def success_vs_tokens(headline: pd.DataFrame, spec: StudySpec) -> Figure:
    fig, ax = _figure()
    title = "Success against tokens used (mean per cell, all LLM calls)"
    data = headline.dropna(subset=["tokens_per_cell", "kernel_success_pct"]) if not headline.empty else headline
    data = data[data["cells_with_result"] > 0] if not data.empty else data
    if data.empty:
        _no_data(ax, title)
        return fig
    ax.errorbar(data["tokens_per_cell"].astype(float), data["kernel_success_pct"].astype(float),
                yerr=_errors(data, "kernel_success"), fmt="o", capsize=3)
    for row in data.to_dict("records"):
        ax.annotate(_label(spec, row["model"], row["method"]), (row["tokens_per_cell"], row["kernel_success_pct"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=7)
    tokens = data["tokens_per_cell"].astype(float)
    if tokens.min() > 0 and tokens.max() / tokens.min() > 20:
        ax.set_xscale("log")
    ax.margins(x=0.15)
    ax.set_xlabel("tokens per cell (prompt + completion, mean)")
    ax.set_ylabel("% correct custom kernel (95% CI)")
    ax.set_ylim(-2, 102)
    ax.set_title(title)
    return fig


def level_heatmap(levels: pd.DataFrame, spec: StudySpec) -> Figure:
    rows = [(m, meth) for m in spec.models for meth in spec.methods]
    fig, ax = _figure(6.4, max(2.5, 0.45 * len(rows) + 1.5))
    title = "Correct custom kernels by method and level (% of cells with a result)"
    if levels.empty or int(levels["cells_with_result"].sum()) == 0:
        _no_data(ax, title)
        return fig
    cols = spec.levels
    grid = np.full((len(rows), len(cols)), np.nan)
    text = [["" for _ in cols] for _ in rows]
    for r in levels.to_dict("records"):
        i, j = rows.index((r["model"], r["method"])), cols.index(r["level"])
        if r["cells_with_result"]:
            grid[i, j] = 100.0 * r["kernel_success"] / r["cells_with_result"]
        text[i][j] = f"{r['kernel_success']}/{r['cells_with_result']}" if r["cells_with_result"] else "no result"
    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="0.85")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0, vmax=100, aspect="auto")
    for i in range(len(rows)):
        for j in range(len(cols)):
            value = grid[i, j]
            ax.text(j, i, text[i][j] or "-", ha="center", va="center",
                    color="white" if not np.isnan(value) and value < 50 else "black", fontsize=8)
    ax.set_xticks(range(len(cols)), [f"L{c}" for c in cols])
    ax.set_yticks(range(len(rows)), [_label(spec, m, meth) for m, meth in rows])
    fig.colorbar(image, ax=ax, label="% correct custom kernel")
    ax.set_title(title)
    return fig


def save_figure(fig: Figure, folder: Path, name: str) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    with matplotlib.rc_context(RC):
        for fmt in FORMATS:
            path = folder / f"{name}.{fmt}"
            tmp = folder / f".{name}.tmp.{fmt}"
            fig.savefig(tmp, format=fmt, dpi=150, metadata={"Date": None} if fmt == "svg" else None)
            tmp.replace(path)  # atomic, like every other result file
            paths.append(path)
    return paths


FIGURES: dict[str, str] = {
    "best_of_n": "Best-of-n scaling",
    "speedup_cdf": "Speedup distribution of correct custom kernels (CDF)",
    "success_vs_attempts": "Success rate against number of attempts",
    "success_vs_tokens": "Success against tokens used",
    "level_heatmap": "Correct custom kernels by method and level",
}


def build_figures(tables: dict[str, pd.DataFrame], cells: pd.DataFrame, candidates: pd.DataFrame,
                  spec: StudySpec) -> dict[str, Callable[[], Figure]]:
    """Figure name -> a function drawing it (so a caller can render one at a time)."""
    return {
        "best_of_n": lambda: best_of_n(tables["best_of_n"], spec),
        "speedup_cdf": lambda: speedup_cdf(cells, spec),
        "success_vs_attempts": lambda: success_vs_attempts(candidates, cells, spec),
        "success_vs_tokens": lambda: success_vs_tokens(tables["headline"], spec),
        "level_heatmap": lambda: level_heatmap(tables["levels"], spec),
    }
