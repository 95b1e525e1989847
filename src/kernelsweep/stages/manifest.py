"""`kernelsweep manifest`: the study file the report reads (report/study.json):
the resolved config's view of the study plus each task's id, level and name."""

from __future__ import annotations

import json
from typing import Any, Mapping

from kernelsweep.core.fileio import read_json, write_json
from kernelsweep.study.matrix import precisions_of


def manifest(config: Mapping[str, Any], tasks: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The manifest of a resolved config (kernelsweep.study.matrix.validate_config) and its task records."""
    return {
        "ablation_base": config["report"]["ablation_base"],
        "baseline_modes": config["baseline"]["modes"],
        "config": dict(config),
        "device": config["device"],
        "methods": config["methods"],
        "models": config["models"],
        "precisions": precisions_of(config["precision"]),
        "samples": int(config["samples"]),
        "tasks": [{k: task[k] for k in ("id", "level", "name")} for task in tasks],
    }


def configure(parser) -> None:
    parser.add_argument("--config", required=True, help="the resolved study config as JSON (from the workflow)")
    parser.add_argument("--tasks", nargs="+", required=True, help="task JSON files")
    parser.add_argument("--out", required=True)


def main(args) -> int:
    write_json(args.out, manifest(json.loads(args.config), [read_json(p) for p in args.tasks]))
    return 0
