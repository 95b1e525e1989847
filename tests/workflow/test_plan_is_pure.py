"""Planning has no side effects: `snakemake -n` (every parse of the Snakefile)
writes, moves and deletes nothing under results/, also when it finds an earlier
version's outage record (README, "Results from earlier versions"), which only a
real run moves to results/stale/ before it redoes the call."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from kernelsweep.study.matrix import REPO_ROOT

CELL = "runs/fp32/recorded-demo/zero_shot/L0-001/s0"
RECORD = f"{CELL}/t0/c0/response.json"
OUTAGE = {"status": "failed", "raw_text": None, "extraction": None, "error": {
    "type": "GenerationFailed",
    "message": "POST http://127.0.0.1:8000/v1/chat/completions failed after 5 attempt(s): ConnectError: "
               "[Errno 111] Connection refused"}}


def snakemake(results: Path, *args: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--config", f"results={results}", "--cores", "1", *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"})


def tree(root: Path) -> dict[str, tuple]:
    """Every file and folder under root: its kind, size, mtime and content hash."""
    found = {}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
        found[path.relative_to(root).as_posix()] = (path.is_dir(), st.st_size, st.st_mtime_ns, digest)
    return found


def planned(proc: subprocess.CompletedProcess) -> dict[str, int]:
    table = proc.stdout.split("Job stats:")[-1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M) if m[1] != "total"}


def write_outage(path: Path) -> None:
    """An earlier version's record of a call that got no answer, as old as the file it replaces."""
    before = path.stat()
    path.write_text(json.dumps(OUTAGE, indent=2))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def test_dry_run_of_a_finished_study_with_an_outage_record_changes_nothing(tmp_path):
    results = tmp_path / "results"
    first = snakemake(results, "-n")
    assert first.returncode == 0, first.stderr[-3000:]
    assert not results.exists()  # nothing made, not even the folder
    # Finish the study as dag_noop does: every planned output, all as old as each other.
    stamp = time.time() - 60
    for block in re.findall(r"^\s+output: (.+)$", first.stdout, re.M):
        for name in block.split(", "):
            path = Path(name.strip())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
            os.utime(path, (stamp, stamp))
    write_outage(results / RECORD)
    before = tree(results)

    for _ in range(2):
        proc = snakemake(results, "-n")
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert tree(results) == before
    output = proc.stdout + proc.stderr
    assert "1 response record(s) held an outage" in output and str(results / RECORD) in output
    # The call and everything after it, nothing else.
    assert planned(proc) == {"retire_outage_record": 1, "generate_n1": 1, "compile_n1": 1, "evaluate_n1": 1,
                             "final": 1, "report": 1, "all": 1}, proc.stdout[-3000:]


def test_results_from_before_precision_was_a_path_part_stop_the_plan_and_stay(tmp_path):
    results = tmp_path / "results"
    old = results / "runs/recorded-demo/zero_shot/L0-001/s0/t0/c0"
    old.mkdir(parents=True)
    (old / "eval.json").write_text(json.dumps({"category": "correct_tie", "precision": "fp32"}))
    before = tree(results)
    proc = snakemake(results, "-n")
    assert proc.returncode != 0 and "kernelsweep relayout --results" in proc.stdout + proc.stderr
    assert tree(results) == before


def test_a_run_moves_the_outage_record_aside_and_redoes_the_call_once(tmp_path):
    results = tmp_path / "results"
    record = results / RECORD
    made = snakemake(results, str(record))  # the task file and the (replayed) call
    assert made.returncode == 0, made.stderr[-3000:]
    answer = json.loads(record.read_text())["raw_text"]
    write_outage(record)
    before = tree(results)

    dry = snakemake(results, "-n", str(record))
    assert tree(results) == before
    assert planned(dry) == {"retire_outage_record": 1, "generate_n1": 1}, dry.stdout[-3000:]

    run = snakemake(results, str(record))
    assert run.returncode == 0, run.stderr[-3000:]
    redone = json.loads(record.read_text())
    assert redone["status"] == "ok" and redone["raw_text"] == answer  # the call made again (replayed: same answer)
    assert json.loads((results / "stale" / RECORD).read_text()) == OUTAGE  # kept, where it was under results/
    again = snakemake(results, "-n", str(record))
    assert "Nothing to be done" in again.stdout + again.stderr, again.stdout[-3000:]
