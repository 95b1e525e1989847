"""Write the study manifest the report reads: the config's view of the study
plus each task's id, level and name."""

from __future__ import annotations

import argparse
import json
import sys

from kernelsweep.fileio import read_json, write_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kernelsweep.stages.manifest")
    parser.add_argument("--manifest", required=True, help="JSON from the workflow")
    parser.add_argument("--tasks", nargs="+", required=True, help="task JSON files")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    manifest = json.loads(args.manifest)
    manifest["tasks"] = [{k: read_json(p)[k] for k in ("id", "level", "name")} for p in args.tasks]
    write_json(args.out, manifest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
