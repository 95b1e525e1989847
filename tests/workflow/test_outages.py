"""An outage is never a result: a study interrupted by a fault of the machine
ends with exactly the results of an uninterrupted run, once the same command
is run again. Real parts throughout: `snakemake` on the Snakefile, the model
server a separate process on 127.0.0.1 (tests/workflow/loopback_model.py,
answers a pure function of the request), real evaluations on the CPU.

Faults: the server SIGKILLed while it holds a call, in the middle of a
three-task study; a generate job SIGKILLed mid-call; the results disk full
(a small tmpfs). After each: the run fails, no cell is recorded as a model
failure, nothing written is corrupt, and a rerun equals the reference run."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from kernelsweep.study.matrix import REPO_ROOT

SERVER = Path(__file__).with_name("loopback_model.py")
TASKS = ("L0-001", "L0-002", "L0-003")
MODEL = "served"

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(predicate, what: str, timeout: float = 600.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Server:
    """The loopback model server as its own process; restartable on its port."""

    def __init__(self, state: Path, port: int | None = None):
        self.state, self.port, self.proc = state, port or free_port(), None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, hold: str = "") -> "Server":
        (self.state / "ready").unlink(missing_ok=True)
        self.proc = subprocess.Popen([sys.executable, str(SERVER), "--port", str(self.port), "--state",
                                      str(self.state), "--hold", hold])
        wait_for(lambda: (self.state / "ready").exists() or self.proc.poll() is not None, "the server", 60)
        assert self.proc.poll() is None, "the loopback server did not start"
        return self

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def posts(self) -> int:
        log = self.state / "posts.log"
        return len(log.read_text().splitlines()) if log.exists() else 0


@pytest.fixture
def server(tmp_path):
    started = []

    def make(port=None) -> Server:
        s = Server(tmp_path / f"server{len(started)}", port)
        started.append(s)
        return s

    yield make
    for s in started:
        s.kill()


def study(folder: Path, url: str, results: Path | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = {
        "results": str(results or folder / "results"),
        "device": "cpu",
        "tasks": {"source": "demo", "levels": [0], "ids": [1, 2, 3]},
        # A short wait: the server stays down in these tests, the job must fail soon.
        "models": {MODEL: {"backend": "openai", "base_url": url, "model": "loopback", "max_retries": 1,
                           "backoff_s": 0.2, "wait_s": 1, "timeout_s": 120}},
        "methods": {"zero_shot": {"strategy": "zero_shot"}},
        "evaluation": {"trials": 2, "timing_trials": 5, "warmup": 1, "timeout_s": 120, "compile_timeout_s": 300},
        "baseline": {"modes": ["eager"], "timing_trials": 5},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def snakemake_cmd(config: Path, *targets: str) -> list[str]:
    # --keep-going: one cell's outage must not stop the others (also the default profile's setting).
    # Targets go first: --configfile takes several values.
    return [sys.executable, "-m", "snakemake", *targets, "-s", str(REPO_ROOT / "Snakefile"), "--directory",
            str(config.parent), "--cores", "2", "--keep-going", "--configfile", str(config)]


def cells(config: Path) -> list[str]:
    """The cells' final.json files: the fault runs' targets (the report and its baselines add
    nothing here and cost a minute; the reference run builds them, rule all)."""
    results = Path(yaml.safe_load(config.read_text())["results"])
    return [str(results / "runs" / "fp32" / MODEL / "zero_shot" / t / "s0" / "final.json") for t in TASKS]


def run(config: Path, *targets: str) -> subprocess.CompletedProcess:
    return subprocess.run(snakemake_cmd(config, *(targets or cells(config))), cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=1500)


def results_of(results: Path) -> dict:
    """What a study concluded, cell by cell: the answer, the candidate, the verdicts."""
    out = {}
    for task in TASKS:
        cell = results / "runs" / "fp32" / MODEL / "zero_shot" / task / "s0"
        response = json.loads((cell / "t0/c0/response.json").read_text())
        final = json.loads((cell / "final.json").read_text())
        out[task] = {"status": response["status"], "raw_text": response["raw_text"], "seed": response["seed"],
                     "candidate": (cell / "t0/c0/candidate.py").read_text(),
                     "category": json.loads((cell / "t0/c0/eval.json").read_text())["category"],
                     "final": (final["status"], final["result"]["category"], final["result"]["correct"])}
    return out


def assert_no_outage_recorded(results: Path) -> None:
    """No cell holds a failed call or a generation_failed verdict, every JSON parses, no temp file is left."""
    for path in results.rglob("*.json"):
        record = json.loads(path.read_text())  # a truncated file would raise here
        if path.name == "response.json":
            assert record["status"] == "ok", (path, record.get("error"))
        if path.name == "eval.json":
            assert record["category"] != "generation_failed", path
    leftovers = [p for p in results.rglob(".*.json.*") if p.is_file()]
    assert not leftovers, leftovers


class Reference(dict):
    """The uninterrupted run's results (cell by cell), with its study and server port."""

    config: Path
    port: int


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Reference:
    """The uninterrupted run: what every interrupted study must end with."""
    tmp = tmp_path_factory.mktemp("reference")
    s = Server(tmp / "server").start()
    try:
        config = study(tmp / "study", s.url)
        proc = subprocess.run(snakemake_cmd(config), cwd=REPO_ROOT, capture_output=True, text=True, timeout=1500)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert s.posts() == len(TASKS)
    finally:
        s.kill()
    found = Reference(results_of(config.parent / "results"))
    found.config, found.port = config, s.port
    # The loopback answers both ways: a model outcome (prose) and a rewrite.
    assert {r["category"] for r in found.values()} >= {"no_code"} and len(found) == 3, found
    return found


def test_server_killed_mid_study_then_rerun_equals_uninterrupted(reference, server):
    s = server().start(hold="1")  # the second call is held open; the server dies under it
    config = study(Path(s.state.parent, "study"), s.url)
    proc = subprocess.Popen(snakemake_cmd(config, *cells(config)), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for(lambda: (s.state / "holding-1").exists(), "the held call")
        s.kill()
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    results = config.parent / "results"
    assert proc.returncode != 0, "an outage must fail the run"
    logs = "".join(p.read_text() for p in (results / "logs/generate").rglob("*.log"))
    assert f"no answer from the server at {s.url}" in logs and "Nothing was recorded" in logs, logs[-3000:]
    assert_no_outage_recorded(results)
    finals = [t for t in TASKS if (results / "runs" / "fp32" / MODEL / "zero_shot" / t / "s0/final.json").exists()]
    assert len(finals) == 1, finals  # the answered call's cell completed (--keep-going); the others wait

    s.start()  # the server is back, on the same port
    before = s.posts()
    proc2 = run(config)
    assert proc2.returncode == 0, proc2.stderr[-4000:]
    assert s.posts() - before == 2  # only the two unanswered calls are made again
    assert_no_outage_recorded(results)
    assert results_of(results) == reference


def generate_pids(marker: str) -> list[int]:
    """Processes running `kernelsweep generate` for the study in `marker`'s folder."""
    pids = []
    for proc in Path("/proc").iterdir():
        try:
            cmd = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"generate" in cmd and any(marker.encode() in part for part in cmd) and b"kernelsweep" in b" ".join(cmd):
            pids.append(int(proc.name))
    return pids


def test_generate_job_sigkilled_mid_call_then_rerun_equals_uninterrupted(reference, server):
    s = server().start(hold="0")
    config = study(Path(s.state.parent, "study"), s.url)
    proc = subprocess.Popen(snakemake_cmd(config, *cells(config)), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for(lambda: (s.state / "holding-0").exists(), "the held call")
        pids = [p for p in generate_pids(str(config.parent)) if Path(f"/proc/{p}/cmdline").read_bytes().startswith(
            sys.executable.encode())]
        assert pids, "no generate process found"
        # With two cores another cell's generate job may be running beside the
        # held one: it is killed too, and its cell must be left empty as well.
        killed = set()
        for pid in pids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                os.kill(pid, signal.SIGKILL)
            except OSError:
                continue  # it ended on its own meanwhile
            killed |= {t for t in TASKS if f"/{t}/".encode() in cmd}
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    results = config.parent / "results"
    assert proc.returncode != 0
    assert_no_outage_recorded(results)
    missing = [t for t in TASKS if not (results / "runs" / "fp32" / MODEL / "zero_shot" / t / "s0/t0/c0/response.json").exists()]
    assert killed and set(missing) == killed, (missing, killed)  # killed calls left nothing; the others completed

    proc2 = run(config)
    assert proc2.returncode == 0, proc2.stderr[-4000:]
    assert_no_outage_recorded(results)
    assert results_of(results) == reference


@pytest.fixture
def small_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Fill the disk to the last byte; the filler file is returned to free it again."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        for size in (1 << 20, 4096, 1):
            try:
                while True:
                    os.write(fd, b"\0" * size)
            except OSError:
                pass
    finally:
        os.close(fd)
    return filler


def test_results_disk_filling_mid_run_fails_cleanly_then_rerun_equals_uninterrupted(reference, server, small_disk):
    s = server().start()
    results = small_disk / "results"
    config = study(Path(s.state.parent, "study"), s.url, results=results)
    proc = subprocess.Popen(snakemake_cmd(config, *cells(config)), cwd=REPO_ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        wait_for(lambda: s.posts() >= 1, "the first model call")
        filler = fill(small_disk)  # the disk fills while jobs are writing
        out, _ = proc.communicate(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode != 0, "a full disk must fail the run"
    assert f"the disk that holds the results ({results}) has 0.0 MiB free" in out, out[-3000:]
    assert_no_outage_recorded(results)
    finals = list(results.rglob("final.json"))
    assert len(finals) < len(TASKS), "the disk filled too late to test anything"

    again = run(config)  # still full: refused before any job, with the cause
    assert again.returncode != 0 and "Free space, then rerun the same command" in again.stderr, again.stderr[-2000:]

    filler.unlink()  # space again: the same command finishes the study
    proc2 = run(config)
    assert proc2.returncode == 0, proc2.stderr[-4000:]
    assert_no_outage_recorded(results)
    assert results_of(results) == reference


def test_generate_on_a_full_disk_names_the_cause_and_writes_nothing(server, small_disk, tmp_path):
    s = server().start()
    prompt = tmp_path / "prompt.json"
    prompt.write_text(json.dumps({
        "role": "generator", "params": {},
        "key": {"model": MODEL, "method": "zero_shot", "task": "L0-001", "sample": 0, "turn": 0},
        "messages": [{"role": "user", "content": "```python\nclass Model: pass\n```"}]}))
    spec = json.dumps({"backend": "openai", "base_url": s.url, "model": "loopback"})
    out = small_disk / "t0"
    cmd = [sys.executable, "-m", "kernelsweep", "generate", "--model", MODEL, "--model-spec", spec,
           "--prompt", str(prompt), "--out-dir", str(out)]
    filler = fill(small_disk)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4, proc.stderr
    assert "the disk is full" in proc.stderr and "rerun the same command" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert not [p for p in out.rglob("*") if p.is_file() and p.stat().st_size == 0 or p.name.startswith(".")]
    assert not (out / "c0/response.json").exists()

    filler.unlink()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((out / "c0/response.json").read_text())["status"] == "ok"


def planned(proc) -> dict[str, int]:
    table = (proc.stdout + proc.stderr).split("Job stats:")[-1]
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)
            if m.group(1) not in ("total", "all")}


def test_outage_recorded_by_an_earlier_version_is_redone(reference, server):
    """The issue's case: an earlier version wrote `failed` ("Connection refused")
    and the workflow took the cell for finished. Planning now retires it."""
    config = reference.config
    results = config.parent / "results"
    c0 = results / "runs" / "fp32" / MODEL / "zero_shot" / "L0-002" / "s0" / "t0" / "c0"
    for name, change in (("response.json", {"status": "failed", "raw_text": None, "extraction": None, "error": {
            "type": "GenerationFailed", "message": "POST http://127.0.0.1:8000/v1/chat/completions failed after 5 "
                                                   "attempt(s): ConnectError: [Errno 111] Connection refused"}}),
                         ("eval.json", {"category": "generation_failed", "correct": False})):
        path = c0 / name
        before = path.stat()
        path.write_text(json.dumps({**json.loads(path.read_text()), **change}, indent=2))
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as old as it was: no mtime trigger
    (c0 / "candidate.py").write_text("")

    s = server(port=reference.port).start()
    proc = run(config)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "1 response record(s) held an outage" in proc.stderr and str(c0 / "response.json") in proc.stderr
    assert s.posts() == 1  # that call, and only that call, was made again
    assert results_of(results) == reference
    (kept,) = (results / "stale").rglob("response.json")
    assert "Connection refused" in kept.read_text()

    # Redoing chosen cells on purpose (README): --forcerun on a response redoes it and what follows.
    target = results / "runs" / "fp32" / MODEL / "zero_shot" / "L0-001" / "s0" / "t0" / "c0" / "response.json"
    cmd = snakemake_cmd(config, *cells(config)) + ["-n", "--forcerun", str(target)]
    dry = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert planned(dry) == {"generate_n1": 1, "compile_n1": 1, "evaluate_n1": 1, "final": 1}, \
        dry.stdout[-3000:]


def test_server_down_from_the_start_is_named_and_records_nothing(reference, server):
    """The issue's first try: the model's base_url on a closed port. The run
    warns before the first job, fails, and leaves every cell unfinished."""
    s = server()  # its port, not listening yet
    config = study(Path(s.state.parent, "study"), s.url)
    results = config.parent / "results"
    responses = [str(results / "runs" / "fp32" / MODEL / "zero_shot" / t / "s0/t0/c0/response.json") for t in TASKS]
    down = subprocess.run(snakemake_cmd(config, *responses), cwd=REPO_ROOT, capture_output=True, text=True,
                          timeout=900)
    assert down.returncode != 0
    assert f"WARNING: model '{MODEL}': no answer from the server at {s.url}" in down.stderr, down.stderr[-3000:]
    assert f"fix models.{MODEL}.base_url" in down.stderr
    assert not list(results.rglob("response.json")) and not list(results.rglob("eval.json"))

    s.start()
    up = subprocess.run(snakemake_cmd(config, *responses), cwd=REPO_ROOT, capture_output=True, text=True,
                        timeout=900)
    assert up.returncode == 0, up.stderr[-3000:]
    assert "WARNING" not in up.stderr
    for task in TASKS:
        record = json.loads((results / "runs" / "fp32" / MODEL / "zero_shot" / task / "s0/t0/c0/response.json").read_text())
        assert record["status"] == "ok" and record["raw_text"] == reference[task]["raw_text"]
