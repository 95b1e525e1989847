"""`kernelsweep evaluate-turn` (stages/evaluate_turn.py), the study's one job per
turn: killed between two candidates, its rerun keeps the finished record and
evaluates only the rest; a record kept for other inputs is not taken."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelsweep.core.fileio import sha256_file
from kernelsweep.stages.evaluate_turn import RESUME, resume_key

FIXTURES = Path(__file__).resolve().parents[1] / "evaluator" / "fixtures"
TURN = "runs/fp32/m/x/L1-001/s0/t0"


def a_turn(results: Path) -> list[Path]:
    """Two plain-PyTorch candidates of one turn, built by the study's compile step."""
    reference = results / "tasks" / "L1-001.py"
    reference.parent.mkdir(parents=True)
    shutil.copy(FIXTURES / "references" / "add.py", reference)
    (results / "tasks" / "L1-001.json").write_text(json.dumps({"sha256": sha256_file(reference)}))
    candidates = []
    for c in range(2):
        folder = results / TURN / f"c{c}"
        folder.mkdir(parents=True)
        shutil.copy(FIXTURES / "cpu" / "pytorch_only.py", folder / "candidate.py")
        (folder / "response.json").write_text(json.dumps({"status": "ok"}))
        candidates.append(folder / "candidate.py")
    built = subprocess.run([sys.executable, "-m", "kernelsweep", "compile-turn", "--candidates", *map(str, candidates),
                            "--device", "cpu", "--build-dir", str(results / "build")],
                           capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stderr
    return [c.parent / "build.json" for c in candidates]


def command(results: Path, builds: list[Path]) -> list[str]:
    return [sys.executable, "-m", "kernelsweep", "evaluate-turn", "--builds", *map(str, builds), "--turn", "0",
            "--goal", "none", "--last", "--select", str(results / TURN / "select.json"),
            "--slots", f"--results {results} --gpus cpu", "--logs", str(results / "logs"), "--",
            "--precision", "fp32", "--device", "cpu", "--trials", "2", "--timing-trials", "5", "--warmup", "1",
            "--shape-variants", "0", "--build-dir", str(results / "build")]


@pytest.mark.slow
def test_a_killed_turn_keeps_its_finished_records(tmp_path):
    results = tmp_path / "results"
    builds = a_turn(results)
    kept = builds[0].parent / RESUME
    proc = subprocess.Popen(command(results, builds), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.time() + 300
    while not kept.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)  # while the second candidate is evaluated
    proc.wait()
    assert kept.exists(), "the first candidate's record was not kept before the second one started"
    assert not (builds[1].parent / RESUME).exists() and not (results / TURN / "select.json").exists()
    first = json.loads(kept.read_text())["record"]

    done = subprocess.run(command(results, builds), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{builds[0].parent}: kept from an earlier run of this turn" in done.stdout
    records = [json.loads((b.parent / "eval.json").read_text()) for b in builds]
    assert records[0] == first  # the same evaluation, not a new one
    assert records[1]["category"] == records[0]["category"] == "no_custom_kernel"
    assert records[1]["run"]["started"] > first["run"]["finished"]
    selection = json.loads((results / TURN / "select.json").read_text())
    assert selection["turn"] == 0 and selection["stop"] is True
    assert not list(results.rglob(RESUME))  # a finished turn keeps nothing: a forced rerun measures again
    assert (results / "logs" / "c1.log").is_file()


def test_a_kept_record_is_keyed_by_what_it_judged(tmp_path):
    folder = tmp_path / "results" / TURN / "c0"
    folder.mkdir(parents=True)
    (tmp_path / "results" / "tasks").mkdir()
    (tmp_path / "results" / "tasks" / "L1-001.py").write_text("reference")
    for name in ("build.json", "candidate.py", "response.json"):
        (folder / name).write_text(name)
    build = folder / "build.json"
    key = resume_key(build, ["--precision", "fp32"])
    assert resume_key(build, ["--precision", "fp32"]) == key
    assert resume_key(build, ["--precision", "bf16"]) != key
    for changed in (folder / "candidate.py", folder / "response.json", tmp_path / "results" / "tasks" / "L1-001.py"):
        before = changed.read_text()
        changed.write_text(before + " changed")
        assert resume_key(build, ["--precision", "fp32"]) != key, changed
        changed.write_text(before)


@pytest.mark.slow
def test_a_turn_with_nothing_to_run_for_a_candidate_claims_nothing_for_it(tmp_path):
    """A candidate whose model call left an outage record fails the job (no verdict from an
    outage) after the others are evaluated and kept; a stopped one is recorded without a slot."""
    results = tmp_path / "results"
    builds = a_turn(results)
    response = builds[1].parent / "response.json"
    response.write_text(json.dumps({"status": "failed", "error": {
        "type": "GenerationFailed", "message": "POST http://127.0.0.1:8000/v1/chat/completions failed after "
                                               "5 attempt(s): ConnectError: [Errno 111] Connection refused"}}))
    refused = subprocess.run(command(results, builds), capture_output=True, text=True, timeout=600)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "records an outage, not the model's answer" in refused.stderr
    assert (builds[0].parent / RESUME).is_file() and not (results / TURN / "select.json").exists()
    assert not list(results.rglob("eval.json"))

    response.write_text(json.dumps({"status": "stopped"}))
    done = subprocess.run(command(results, builds), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{builds[0].parent}: kept from an earlier run of this turn" in done.stdout
    assert json.loads((builds[1].parent / "eval.json").read_text())["category"] == "stopped"
    assert not (results / "logs" / "c1.log").exists()  # no evaluation process, no slot
    assert json.loads((results / TURN / "select.json").read_text())["best"]["cand"] == 0
