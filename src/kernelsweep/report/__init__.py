"""Aggregation and report: raw per-cell result files (docs/results.md) -> tidy
tables (parquet, CSV), Markdown/HTML tables, figures and REPORT.md.

    spec       the study description (STUDY.json) and its ablation / best-of-n structure
    collect    raw files -> one row per candidate and per expected cell, plus data problems
    baselines  speedups against eager (the evaluator's) and torch.compile (baseline stage)
    stats      bootstrap intervals over tasks
    aggregate  per-method numbers (rates, fast_p, geometric means)
    tables     the tables, formatted; figures: the figures; document: REPORT.md
    react      the react strategy's section: its trajectories' tables, figures and pages
    trajectory_page  one react trace as an HTML page (also written by each react cell)
    build      all of the above in one call (build_report); cli: `kernelsweep report`

Nothing is imported here, so `kernelsweep report --help` stays light.
"""
