"""`kernelsweep report`: aggregate the raw per-cell result files into tables,
figures and REPORT.md."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--results", required=True, type=Path, help="the study's results folder (config: results)")
    parser.add_argument("--study", required=True, type=Path,
                        help="STUDY.json: models, methods, tasks, samples and the resolved config "
                             "(written by the Snakemake report rule)")
    parser.add_argument("--out", type=Path, default=None, help="output folder (default: RESULTS/report)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="processes for the torch.compile comparisons (one bootstrap each; default 1)")
    parser.add_argument("--strict", action="store_true",
                        help="exit with status 1 if any raw file was left out or any data check failed")


def main(args: argparse.Namespace) -> int:
    from kernelsweep.report.spec import ReportInputError, load_study

    try:
        spec = load_study(args.study)
        if args.jobs < 1:
            raise ReportInputError(f"--jobs must be at least 1, got {args.jobs}")
        if not args.results.is_dir():
            raise ReportInputError(f"results folder not found: {args.results}")
        from kernelsweep.report.build import build_report  # pandas and matplotlib: only once inputs are fine

        result = build_report(args.results, args.out or args.results / "report", spec, args.jobs)
    except ReportInputError as e:
        print(f"kernelsweep report: error: {e}", file=sys.stderr)
        return 2
    c = result.collection
    counts = c.cells["status"].value_counts()
    report = next(p for p in result.files if p.name == "REPORT.md")
    print(f"kernelsweep report: {int(c.cells['has_result'].sum())} of {len(c.cells)} cells with a final result "
          f"({int(counts.get('missing', 0))} missing, {int(counts.get('unreadable', 0))} unreadable); "
          f"{len(c.candidates)} candidates; wrote {len(result.files)} files; see {report}")
    excluded = [p for p in c.problems if p.effect == "excluded"]
    if c.problems:
        print(f"kernelsweep report: {len(c.problems)} data problems ({len(excluded)} left files out); "
              f"listed under 'Data checks' in {report}", file=sys.stderr)
    return 1 if args.strict and (c.problems or c.unexpected_runs) else 0
