"""`kernelsweep tasks`: list, fetch, write and validate tasks.

    kernelsweep tasks list     --config config/config.yaml [--long]
    kernelsweep tasks fetch    --source hub --levels 1,2,3
    kernelsweep tasks write    --config FILE --task L1-001 --out results/tasks/L1-001.json
    kernelsweep tasks reference results/tasks/L1-001.json --out results/tasks/L1-001.py
    kernelsweep tasks validate --source local --path ../shared/kernelbench --levels 1 --ids 1-10 \\
                               [--device cuda] [--forward always] [--jobs 4]
    kernelsweep tasks validate --file my_reference.py

The selection comes from the `tasks:` key of --config (a YAML or JSON file) or
from --selection (that mapping as JSON, what the workflow passes), overridden
key by key by the flags. Exit status: 0 fine, 1 an invalid
reference, 2 a bad selection or a missing / unreachable source.
"""

from __future__ import annotations

import argparse
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kernelsweep.tasks.errors import TaskConfigError, TaskError, TaskInvalidError
from kernelsweep.tasks.materialize import load_problem, materialize
from kernelsweep.tasks.plan import plan_task_ids, select_problems
from kernelsweep.tasks.selection import parse_selection
from kernelsweep.tasks.validate import (
    DEFAULT_CPU_MEMORY_MB, DEFAULT_MAX_NUMEL, DEFAULT_TIMEOUT_S, FORWARD_MODES, validate_reference,
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = __doc__.split("\n\n", 1)[1]
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)

    p = sub.add_parser("list", help="print the task ids the selection plans (no network)")
    _selection_args(p)
    p.add_argument("--long", action="store_true", help="also print each problem's name (reads the source)")

    p = sub.add_parser("fetch", help="download the hub splits of the selection into the HF cache")
    _selection_args(p)

    p = sub.add_parser("write", help="read, validate and write one task file")
    _selection_args(p)
    p.add_argument("--task", required=True, help="task id, e.g. L1-001")
    p.add_argument("--out", required=True, help="output path, e.g. results/tasks/L1-001.json")
    p.add_argument("--no-validate", action="store_true", help="write without running the reference")
    _check_args(p)

    p = sub.add_parser("reference", help="write a task file's code as the module the evaluator imports")
    p.add_argument("task_file", help="a task file written by `tasks write`")
    p.add_argument("--out", required=True, help="output path, e.g. results/tasks/L1-001.py")

    p = sub.add_parser("validate", help="check references: import, interface, forward")
    _selection_args(p)
    p.add_argument("--task", action="append", default=[], help="a task id to check (repeatable; default: all selected)")
    p.add_argument("--file", action="append", default=[], help="check a reference file instead of a selection (repeatable)")
    p.add_argument("--jobs", type=int, default=1, help="checks run in parallel (default 1)")
    _check_args(p)


def _selection_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("selection (flags override the config's tasks: keys)")
    source = g.add_mutually_exclusive_group()
    source.add_argument("--config", help="pipeline config (YAML/JSON) whose tasks: key holds the selection")
    source.add_argument("--selection", type=json.loads, help="the tasks: mapping itself, as JSON")
    g.add_argument("--source", choices=("demo", "hub", "local"))
    g.add_argument("--path", help="local: the KernelBench checkout; hub: a folder of parquet files")
    g.add_argument("--repo", help="hub dataset (default ScalingIntelligence/KernelBench)")
    g.add_argument("--revision", help="hub branch, tag or commit")
    g.add_argument("--cache-dir", help="hub: HF cache folder (default HF_HUB_CACHE)")
    g.add_argument("--levels", help="comma-separated levels, e.g. 1,2,3")
    g.add_argument("--ids", help='ids and ranges, e.g. "1-10,15", or "all"')
    g.add_argument("--names", help="regex searched in problem names")
    g.add_argument("--repo-root", default=".", help="relative paths resolve here (default: current folder)")


def _check_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("reference check")
    g.add_argument("--device", default="cpu", help="device for the forward check (default cpu)")
    g.add_argument("--forward", choices=FORWARD_MODES, default="auto",
                   help="auto: on cpu only for small inputs; always; never (default auto)")
    g.add_argument("--max-numel", type=int, default=DEFAULT_MAX_NUMEL,
                   help=f"auto mode's CPU bound on input + parameter elements (default {DEFAULT_MAX_NUMEL})")
    g.add_argument("--cpu-memory-mb", type=int, default=DEFAULT_CPU_MEMORY_MB,
                   help=f"auto mode's CPU memory cap for building and running it (default {DEFAULT_CPU_MEMORY_MB})")
    g.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_S,
                   help=f"seconds per reference check (default {DEFAULT_TIMEOUT_S:g})")


def main(args: argparse.Namespace) -> int:
    try:
        return ACTIONS[args.action](args)
    except TaskInvalidError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def selection_from_args(args: argparse.Namespace) -> dict[str, Any]:
    selection: dict[str, Any] = dict(_read_config(args.config) if args.config else args.selection or {})
    overrides = {
        "source": args.source, "path": args.path, "repo": args.repo, "revision": args.revision,
        "cache_dir": args.cache_dir, "ids": args.ids, "names": args.names,
        "levels": _parse_level_flag(args.levels) if args.levels is not None else None,
    }
    selection.update({k: v for k, v in overrides.items() if v is not None})
    if "source" not in selection:
        raise TaskConfigError("no selection: pass --config FILE (with a tasks: key) or --source demo|hub|local")
    return selection


def _read_config(path: str) -> Any:
    import yaml  # JSON is YAML too

    try:
        doc = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise TaskConfigError(f"cannot read config {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise TaskConfigError(f"config {path} is not valid YAML/JSON: {e}") from None
    if not isinstance(doc, dict) or "tasks" not in doc:
        raise TaskConfigError(f"config {path} has no tasks: key")
    return doc["tasks"]


def _parse_level_flag(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise TaskConfigError(f"--levels takes comma-separated integers, got {text!r}") from None


def _list(args: argparse.Namespace) -> int:
    selection = selection_from_args(args)
    if not args.long:
        print("\n".join(plan_task_ids(selection, args.repo_root)))
        return 0
    from kernelsweep.tasks.ids import format_task_id

    for level, pid, name in select_problems(parse_selection(selection, args.repo_root)):
        print(f"{format_task_id(level, pid)}\t{name}")
    return 0


def _fetch(args: argparse.Namespace) -> int:
    sel = parse_selection(selection_from_args(args), args.repo_root)
    if sel.source != "hub":
        raise TaskConfigError(f"fetch only applies to source hub (source is {sel.source}): nothing to download")
    folder, commit = sel.make_source().fetch(list(sel.levels))
    print(f"{sel.repo} at {commit or sel.revision or 'main'}: {folder}")
    return 0


def _write(args: argparse.Namespace) -> int:
    record = materialize(
        selection_from_args(args), args.task, args.out, repo_root=args.repo_root,
        validate=not args.no_validate, device=args.device, forward=args.forward,
        max_numel=args.max_numel, timeout_s=args.timeout, cpu_memory_mb=args.cpu_memory_mb,
    )
    print(f"wrote {args.out}: {record['id']} {record['name']} sha256 {record['sha256'][:12]}"
          f"{_describe(record['validation'])}")
    return 0


def _reference(args: argparse.Namespace) -> int:
    from kernelsweep.core.fileio import read_json, write_atomic

    write_atomic(args.out, read_json(args.task_file)["code"])
    print(f"wrote {args.out}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    if args.jobs < 1:
        raise TaskConfigError("--jobs must be at least 1")
    if args.file:
        items = [(path, lambda path=path: _read_file(path)) for path in args.file]
    else:
        selection = selection_from_args(args)
        sel = parse_selection(selection, args.repo_root)
        task_ids = args.task or plan_task_ids(selection, args.repo_root)
        items = [(t, lambda t=t: load_problem(sel, t).code) for t in task_ids]

    def check(item: tuple[str, Any]) -> tuple[str, bool, str]:
        label, read_code = item
        try:
            record = validate_reference(read_code(), label, device=args.device, forward=args.forward,
                                        max_numel=args.max_numel, timeout_s=args.timeout,
                                        cpu_memory_mb=args.cpu_memory_mb)
        except TaskInvalidError as e:
            return label, False, e.reason
        return label, True, _describe(record).lstrip(", ")

    invalid = 0
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for label, ok, text in pool.map(check, items):
            invalid += not ok
            print(f"{label}\t{'ok' if ok else 'INVALID'}\t{text}", flush=True)
    print(f"{len(items) - invalid} valid, {invalid} invalid", file=sys.stderr)
    return 1 if invalid else 0


def _read_file(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskConfigError(f"cannot read {path}: {e}") from None


def _describe(validation: dict | None) -> str:
    if validation is None:
        return ", not validated"
    if validation["forward"] == "ran":
        shapes = " ".join("x".join(map(str, s)) for s in validation["output_shapes"])
        warn = f" WARNING: {'; '.join(validation['warnings'])}" if validation["warnings"] else ""
        if validation.get("degenerate"):
            warn += f" DEGENERATE: {validation['degenerate_reason']}"
        return f", forward ran on {validation['device']} in {validation['forward_ms']:.3f} ms -> {shapes}{warn}"
    return f", forward skipped: {validation['skip_reason']}"


ACTIONS = {"list": _list, "fetch": _fetch, "write": _write, "reference": _reference, "validate": _validate}
