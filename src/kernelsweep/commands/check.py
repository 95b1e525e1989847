"""`kernelsweep check`: before a long run, does every configured model answer
and can results be written? One line per check, the fix in each failing line.

    kernelsweep check [--configfile FILE ...] [--directory DIR]

Config files merge as Snakemake merges them (later keys override); without
one, config/config.yaml of the checkout. Relative paths are taken from
--directory (Snakemake's working directory; default: here). Each server gets
one request without retries, so an outage shows at once. Exit 0: all passed;
1: something failed (the study would record nothing for that model); 2: the
config itself is invalid.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import yaml

from kernelsweep.core.fileio import free_bytes
from kernelsweep.study.matrix import REPO_ROOT, ConfigError, load_study
from kernelsweep.tasks import TaskError

LOW_DISK_BYTES = 1 << 30  # below this, a warning: one study writes logs, builds and results
FULL_DISK_BYTES = 1 << 20  # below this the workflow refuses to start
NEARLY_FULL_BYTES = 64 << 20  # below this, failed jobs are blamed on the disk


def configure(parser) -> None:
    parser.add_argument("--configfile", nargs="+", default=None,
                        help="the study's config file(s), as given to snakemake (default: config/config.yaml)")
    parser.add_argument("--directory", default=".", help="Snakemake's working directory (relative paths start here)")


def merge(base: dict, over: dict) -> dict:
    """Snakemake's merge of several --configfile: nested mappings are merged, other values replaced."""
    out = dict(base)
    for key, value in over.items():
        out[key] = merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def load_config(files: list[str] | None) -> dict:
    config: dict = {}
    for name in files or [str(REPO_ROOT / "config" / "config.yaml")]:
        try:
            loaded = yaml.safe_load(Path(name).read_text()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise ConfigError(f"cannot read the config file {name}: {e}") from e
        if not isinstance(loaded, dict):
            raise ConfigError(f"the config file {name} is not a mapping")
        config = merge(config, loaded)
    return config


def check_model(name: str, spec: dict[str, Any]) -> tuple[bool, str]:
    """(passed, what was found) for one model entry."""
    from kernelsweep.models import InfrastructureFailure, ModelSetupError
    from kernelsweep.models.checkpoint import locate
    from kernelsweep.models.spec import normalise

    try:
        spec = normalise(name, spec)
        if spec["backend"] == "replay":
            if not Path(spec["path"]).exists():
                return False, f"replay path {spec['path']} not found; fix models.{name}.path"
            return True, f"replay records at {spec['path']}"
        if spec["backend"] == "corpus":
            from kernelsweep.models.corpus import read

            rows = read(spec["path"], spec["format"])
            return True, f"corpus {spec['path']} ({spec['format']}, {len(rows)} rows)"
        if spec["backend"] == "transformers":
            if spec["prepare"] == "embedded":
                return True, f"embedded checkpoint at {spec['path']} (prepared by the workflow's first job)"
            location = locate(spec["path"], spec["gguf_file"])
            return True, f"checkpoint {location.model_id} ({location.source})"
        if spec["server"]["start"]:
            location = locate(str(spec["server"]["checkpoint"]))
            return True, f"each generation job starts `transformers serve` on {location.model_id}"
        return _check_server(name, spec)
    except ModelSetupError as e:
        return False, str(e)
    except InfrastructureFailure as e:
        return False, str(e)


def _check_server(name: str, spec: dict[str, Any]) -> tuple[bool, str]:
    from kernelsweep.models.openai_backend import OpenAIBackend

    # One attempt, a short timeout: a check must show an outage, not wait it out.
    quick = {**spec, "max_retries": 0, "wait_s": 0.0, "timeout_s": min(float(spec["timeout_s"]), 15.0)}
    with OpenAIBackend(name, quick) as backend:
        backend._check_model()
    return True, f"{spec['base_url']} answers (model '{spec['model']}')"


def unanswered_servers(models: dict[str, dict]) -> list[str]:
    """One quick request to each external model server (the workflow's onstart):
    a server that is down is named before the first job, not in a job log after
    `wait_s`. Warnings only: finished candidates can be evaluated without it."""
    found = []
    for name, spec in models.items():
        if spec.get("backend") == "openai" and not (spec.get("server") or {}).get("start"):
            passed, detail = check_model(name, spec)
            if not passed:
                found.append(f"{detail}\n  (its generation jobs wait up to wait_s for the server, then fail "
                             "without recording anything; all other jobs go on)")
    return found


# The rules whose jobs run candidate code confined (evaluations, builds, the agent's sandbox).
CONFINED_RULES = ("evaluate", "compile_", "react")


def confinement_problem(rules: list[str], device: str) -> str | None:
    """Before a run's first job (the workflow's onstart): when a job to run
    confines candidate code, one confined worker, started with the jobs'
    interpreter, imports torch and the harness (`kernelsweep confinement`).
    None when it did (or nothing to run needs it), else its message."""
    if not any(rule.startswith(CONFINED_RULES) for rule in rules):
        return None
    python = os.environ.get("KERNELSWEEP_PYTHON", sys.executable)
    if not os.path.isabs(python):  # conda environments: each job's own python, not known here
        python = sys.executable
    try:
        done = subprocess.run([python, "-m", "kernelsweep", "confinement", "--device", device],
                              capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"the confinement check did not run: {e}"
    if done.returncode == 0:
        return None
    return done.stderr.strip().removeprefix("kernelsweep confinement: ") or f"the confinement check failed " \
        f"(exit {done.returncode})"


def disk_note(results: str) -> str | None:
    """The message for a results disk (nearly) full, or None. A job's log is
    empty when its disk is full, so the workflow says it for them."""
    free = free_bytes(results)
    if free >= NEARLY_FULL_BYTES:
        return None
    return (f"the disk that holds the results ({results}) has {free / 2**20:.1f} MiB free: jobs fail when they "
            "cannot write their logs and results (nothing half-written is kept). Free space, then rerun the same "
            "command")


def check_results(results: str) -> tuple[bool, str]:
    """The results folder exists (or can be made), takes a write and holds no
    results from before precision was a path part (kernelsweep.study.relayout)."""
    from kernelsweep.core.fileio import storage_fault, write_atomic

    folder = Path(results)
    probe = folder / f".kernelsweep-check-{uuid.uuid4().hex}"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        write_atomic(probe, "x" * 4096)
    except OSError as e:
        return False, f"cannot write to {folder}: {storage_fault(e) or e}"
    probe.unlink()
    from kernelsweep.study import relayout

    if relayout.legacy_paths(folder):  # the workflow would stop on them (common.smk)
        return False, relayout.legacy_note(folder).removeprefix("kernelsweep: ")
    free = free_bytes(folder)
    note = f"{folder} is writable, {free / 2**30:.1f} GiB free"
    if free < LOW_DISK_BYTES:
        note += " (low: a full disk fails the jobs that write; free space before a long run)"
    return True, note


def main(args) -> int:
    try:
        os.chdir(args.directory)
    except OSError as e:
        print(f"kernelsweep check: --directory {args.directory}: {e.strerror}", file=sys.stderr)
        return 2
    try:
        study = load_study(load_config(args.configfile), REPO_ROOT)
    except (ConfigError, TaskError) as e:
        print(f"kernelsweep check: {e}", file=sys.stderr)
        return 2
    outcomes = [(f"model {name}", *check_model(name, spec)) for name, spec in study.config["models"].items()]
    outcomes.append(("results", *check_results(study.results)))
    for what, passed, detail in outcomes:
        print(f"{'ok  ' if passed else 'FAIL'} {what}: {detail}")
    failed = [what for what, passed, _ in outcomes if not passed]
    if failed:
        print(f"kernelsweep check: {len(failed)} check(s) failed ({', '.join(failed)}); fix them before the run",
              file=sys.stderr)
        return 1
    return 0
