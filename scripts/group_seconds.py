"""Seconds per xdist group of a test run, from its JUnit report, for the order in which
tests/conftest.py hands groups to the workers (longest first):

    .venv/bin/python -m pytest -m slow -n 2 --dist loadgroup --junitxml /tmp/slow.xml
    .venv/bin/python scripts/group_seconds.py /tmp/slow.xml [--slurm 420] > tests/group_seconds.json

A group is a test file, or "slurm-cluster" for every test of tests/slurm (which need a
cluster: --slurm gives their seconds where the report's run had none)."""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def group_seconds(report: str, slurm_s: float | None) -> dict[str, float]:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        path = case.get("classname", "").split(".")
        # classname "tests.workflow.test_study_run" (or with a class after the module)
        module = next((i for i, part in enumerate(path) if part.startswith("test_")), len(path) - 1)
        folder = path[1:module + 1] if path and path[0] == "tests" else path[:module + 1]
        group = "slurm-cluster" if folder[:1] == ["slurm"] else "/".join(folder) + ".py"
        seconds[group] += float(case.get("time") or 0.0)
    if slurm_s is not None:
        seconds["slurm-cluster"] = max(seconds.get("slurm-cluster", 0.0), slurm_s)
    return {group: round(s, 1) for group, s in sorted(seconds.items(), key=lambda kv: -kv[1]) if s >= 1.0}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report")
    parser.add_argument("--slurm", type=float, default=None, help="seconds of the SLURM cluster's tests")
    args = parser.parse_args()
    json.dump(group_seconds(args.report, args.slurm), sys.stdout, indent=1)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
