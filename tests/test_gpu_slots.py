"""GPU/CPU timing slots, exercised with real processes, real flock and real kills."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelsweep.runtime import gpu_slots

WRAPPER = [sys.executable, "-m", "kernelsweep", "gpu-slots", "run"]

# The wrapped command: logs which device it got and when it ran, optionally
# waits at a barrier until `expect` peers have logged (proof they ran at once).
CHILD = r"""
import json, os, sys, time
log_dir, name, hold, expect = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
start = time.time()
mine = os.path.join(log_dir, name + ".start")
with open(mine, "w") as f:
    json.dump({"cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "slot": os.environ.get("KERNELSWEEP_GPU_SLOT")}, f)
deadline = time.time() + 20
while expect and sum(n.endswith(".start") for n in os.listdir(log_dir)) < expect:
    if time.time() > deadline:
        sys.exit(9)  # the peers never ran alongside: they were waiting for our slot
    time.sleep(0.02)
time.sleep(hold)
with open(os.path.join(log_dir, name + ".json"), "w") as f:
    json.dump({"cvd": os.environ.get("CUDA_VISIBLE_DEVICES"), "slot": os.environ.get("KERNELSWEEP_GPU_SLOT"),
               "start": start, "end": time.time()}, f)
"""


def wrapped(slots: Path, log_dir: Path, name: str, *, gpus: str | None, hold: float = 0.0,
            expect: int = 0, env: dict | None = None, timeout: float = 60,
            devices: str | None = None) -> subprocess.Popen:
    cmd = list(WRAPPER) + ["--slots-dir", str(slots), "--timeout", str(timeout)]
    if gpus is not None:
        cmd += ["--gpus", gpus]
    if devices is not None:
        cmd += ["--devices", devices]
    cmd += ["--", sys.executable, "-c", CHILD, str(log_dir), name, str(hold), str(expect)]
    return subprocess.Popen(cmd, env=env or clean_env(), stderr=subprocess.PIPE, text=True)


def clean_env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID", gpu_slots.ENV_GPUS, gpu_slots.ENV_SLOTS_DIR,
                        gpu_slots.ENV_DEVICES)}
    env.update(extra)
    return env


def finish(procs: list[subprocess.Popen], timeout: float = 60) -> list[int]:
    codes = []
    for proc in procs:
        _, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        codes.append(proc.returncode)
    return codes


def records(log_dir: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(log_dir.glob("*.json"))]


def assert_no_overlap_per_device(recs: list[dict]) -> None:
    by_device: dict[str, list[dict]] = {}
    for rec in recs:
        by_device.setdefault(rec["slot"], []).append(rec)
    for device, runs in by_device.items():
        runs.sort(key=lambda r: r["start"])
        for before, after in zip(runs, runs[1:]):
            assert after["start"] >= before["end"], f"two jobs shared device {device}: {before} {after}"


def test_two_concurrent_claims_get_distinct_gpus(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # Each child waits until both have started: only possible if the two
    # wrappers hold different slots at the same time.
    procs = [wrapped(tmp_path / "slots", logs, f"job{i}", gpus="2", expect=2) for i in range(2)]
    finish(procs)
    recs = records(logs)
    assert sorted(r["cvd"] for r in recs) == ["0", "1"]
    assert sorted(r["slot"] for r in recs) == ["0", "1"]


def test_many_concurrent_claims_never_share_a_slot(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    # expect=3: no command finishes before three have started, so the first
    # three hold all three slots at once; the other nine queue behind them.
    procs = [wrapped(tmp_path / "slots", logs, f"job{i:02d}", gpus="3", hold=0.15, expect=3) for i in range(12)]
    finish(procs)
    recs = records(logs)
    assert len(recs) == 12
    assert {r["cvd"] for r in recs} == {"0", "1", "2"}
    assert all(r["cvd"] == r["slot"] for r in recs)
    assert_no_overlap_per_device(recs)


@pytest.mark.parametrize("gpus", ["1", "cpu"])
def test_one_slot_serialises_wrapped_commands(tmp_path, gpus):
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = [wrapped(tmp_path / "slots", logs, f"job{i}", gpus=gpus, hold=0.2) for i in range(4)]
    finish(procs)
    recs = records(logs)
    assert len(recs) == 4
    assert_no_overlap_per_device(recs)
    assert len({r["slot"] for r in recs}) == 1
    if gpus == "cpu":
        # A CPU slot leaves CUDA_VISIBLE_DEVICES alone and says "cpu".
        assert all(r["slot"] == "cpu" and r["cvd"] is None for r in recs)
    else:
        assert all(r["cvd"] == "0" for r in recs)


def test_preset_visible_devices_map_slot_i_to_the_ith_entry(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    env = clean_env(CUDA_VISIBLE_DEVICES="3,5")
    procs = [wrapped(tmp_path / "slots", logs, f"job{i}", gpus=None, expect=2, env=env) for i in range(2)]
    finish(procs)
    assert sorted(r["cvd"] for r in records(logs)) == ["3", "5"]
    assert sorted(p.name for p in (tmp_path / "slots").iterdir()) == ["gpu3.lock", "gpu5.lock"]


def test_listed_devices_are_the_only_slots(tmp_path):
    # GPU 0 is left to a generator: six timings on "1,2" use 1 and 2 only, two at once, never sharing.
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = [wrapped(tmp_path / "slots", logs, f"job{i}", gpus=None, devices="1,2", hold=0.1, expect=2)
             for i in range(6)]
    finish(procs)
    recs = records(logs)
    assert len(recs) == 6 and {r["cvd"] for r in recs} == {"1", "2"}
    assert_no_overlap_per_device(recs)
    assert sorted(p.name for p in (tmp_path / "slots").iterdir()) == ["gpu1.lock", "gpu2.lock"]


def test_listed_devices_must_be_visible(tmp_path):
    proc = subprocess.run(WRAPPER + ["--slots-dir", str(tmp_path), "--devices", "0,2", "--", "true"],
                          env=clean_env(CUDA_VISIBLE_DEVICES="1,2"), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "GPU 0 is not in CUDA_VISIBLE_DEVICES='1,2'" in proc.stderr


def test_device_list_sources(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv(gpu_slots.ENV_GPUS, "4")
    monkeypatch.setenv(gpu_slots.ENV_DEVICES, "3")
    assert gpu_slots.slot_devices() == ["3"]  # the list wins over a count
    assert gpu_slots.slot_devices(devices="1, 2") == ["1", "2"]  # the option wins over the environment
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb")
    assert gpu_slots.slot_devices(devices="GPU-bbbb") == ["GPU-bbbb"]
    for bad, message in (("1,1", "more than once"), (",", "comma-separated list"), ("cpu", "GPUs only")):
        with pytest.raises(gpu_slots.SlotError, match=message):
            gpu_slots.slot_devices(devices=bad)


def test_more_slots_than_visible_devices_is_a_clear_error(tmp_path):
    proc = subprocess.run(
        WRAPPER + ["--slots-dir", str(tmp_path), "--gpus", "3", "--", "true"],
        env=clean_env(CUDA_VISIBLE_DEVICES="3,5"), capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == gpu_slots.EXIT_USAGE
    assert "lists only 2 device(s)" in proc.stderr
    assert "Traceback" not in proc.stderr


HOLDER = r"""
import sys, time
from kernelsweep.runtime import gpu_slots
claim = gpu_slots.claim_slot(sys.argv[1], ["0"], timeout=10, label="test-holder")
print(claim.device, flush=True)
time.sleep(120)
"""


def test_killed_holder_releases_its_slot(tmp_path):
    slots = tmp_path / "slots"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(slots)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"
        with pytest.raises(gpu_slots.SlotTimeout, match="test-holder"):
            gpu_slots.claim_slot(slots, ["0"], timeout=0.3)
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
        start = time.monotonic()
        with gpu_slots.claim_slot(slots, ["0"], timeout=10) as claim:
            assert claim.device == "0"
        assert time.monotonic() - start < 5  # freed at exit, not after a timeout
    finally:
        holder.kill()
        holder.wait()


def test_slot_stays_held_while_the_command_outlives_a_killed_wrapper(tmp_path):
    """SIGKILL on the wrapper alone must not free a device its command still uses."""
    slots = tmp_path / "slots"
    pid_file = tmp_path / "child.pid"
    wrapper = subprocess.Popen(
        WRAPPER + ["--slots-dir", str(slots), "--gpus", "1", "--",
                   "sh", "-c", f"echo $$ > {pid_file}; exec sleep 120"],
        env=clean_env(),
    )
    child_pid = None
    try:
        for _ in range(200):
            if pid_file.exists() and pid_file.read_text().strip():
                break
            time.sleep(0.05)
        child_pid = int(pid_file.read_text())
        wrapper.send_signal(signal.SIGKILL)
        wrapper.wait(timeout=10)
        with pytest.raises(gpu_slots.SlotTimeout):
            gpu_slots.claim_slot(slots, ["0"], timeout=0.3)
        os.kill(child_pid, signal.SIGKILL)
        child_pid = None
        with gpu_slots.claim_slot(slots, ["0"], timeout=10) as claim:
            assert claim.device == "0"
    finally:
        wrapper.kill()
        if child_pid:
            os.kill(child_pid, signal.SIGKILL)


def test_timeout_names_the_holder_and_exits_75(tmp_path):
    slots = tmp_path / "slots"
    with gpu_slots.claim_slot(slots, ["cpu"], timeout=1, label="cmd=busy-eval"):
        proc = subprocess.run(
            WRAPPER + ["--slots-dir", str(slots), "--gpus", "cpu", "--timeout", "0.3", "--", "true"],
            env=clean_env(), capture_output=True, text=True, timeout=60,
        )
    assert proc.returncode == gpu_slots.EXIT_NO_SLOT == 75
    assert "no free slot" in proc.stderr and "cmd=busy-eval" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_exit_codes_and_signals_are_passed_through(tmp_path):
    base = WRAPPER + ["--slots-dir", str(tmp_path), "--gpus", "1", "--"]
    assert subprocess.run(base + ["sh", "-c", "exit 7"], env=clean_env(), timeout=60).returncode == 7
    assert subprocess.run(base + ["sh", "-c", "kill -9 $$"], env=clean_env(), timeout=60).returncode == 128 + 9
    missing = subprocess.run(base + ["no-such-command-xyz"], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert missing.returncode == 127 and "command not found: no-such-command-xyz" in missing.stderr


def test_sigterm_is_forwarded_to_the_command(tmp_path):
    marker = tmp_path / "got-term"
    ready = tmp_path / "ready"
    script = f"trap 'echo term > {marker}; exit 5' TERM; touch {ready}; while :; do sleep 0.05; done"
    # A new session so the signal reaches the wrapper only, as from `kill PID`.
    wrapper = subprocess.Popen(WRAPPER + ["--slots-dir", str(tmp_path / "s"), "--gpus", "1", "--", "sh", "-c", script],
                               env=clean_env(), start_new_session=True)
    try:
        for _ in range(200):
            if ready.exists():
                break
            time.sleep(0.05)
        assert ready.exists()
        wrapper.send_signal(signal.SIGTERM)
        assert wrapper.wait(timeout=20) == 5
        assert marker.read_text().strip() == "term"
    finally:
        if wrapper.poll() is None:
            os.killpg(wrapper.pid, signal.SIGKILL)


def test_slot_count_sources(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv(gpu_slots.ENV_GPUS, "2")
    assert gpu_slots.slot_devices() == ["0", "1"]
    assert gpu_slots.slot_devices("auto") == ["0", "1"]
    assert gpu_slots.slot_devices("0") == ["cpu"]
    assert gpu_slots.slot_devices("cpu") == ["cpu"]
    monkeypatch.delenv(gpu_slots.ENV_GPUS)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-aaaa,GPU-bbbb")
    assert gpu_slots.slot_devices() == ["GPU-aaaa", "GPU-bbbb"]
    assert gpu_slots.slot_devices(1) == ["GPU-aaaa"]
    assert gpu_slots.slot_devices("auto") == ["GPU-aaaa", "GPU-bbbb"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert gpu_slots.slot_devices() == ["cpu"]  # nothing visible: the CPU slot
    with pytest.raises(gpu_slots.SlotError, match="GPU count"):
        gpu_slots.slot_devices("-1")


def test_slots_dir_resolution_and_slurm_scoping(monkeypatch, tmp_path):
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.delenv(gpu_slots.ENV_SLOTS_DIR, raising=False)
    assert gpu_slots.resolve_slots_dir(None, tmp_path / "res") == tmp_path / "res" / ".gpu-slots"
    monkeypatch.setenv(gpu_slots.ENV_SLOTS_DIR, str(tmp_path / "env"))
    assert gpu_slots.resolve_slots_dir(None, "results") == tmp_path / "env"
    assert gpu_slots.resolve_slots_dir(tmp_path / "flag") == tmp_path / "flag"
    # Inside a SLURM job GPU slots belong to that allocation alone; the CPU
    # slot to the node, whose cores all jobs there share.
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    assert gpu_slots.resolve_slots_dir(tmp_path / "flag") == tmp_path / "flag" / "slurm-4242"
    host = socket.gethostname()
    assert gpu_slots.resolve_slots_dir(tmp_path / "flag", cpu=True) == tmp_path / "flag" / f"node-{host}"
    monkeypatch.delenv(gpu_slots.ENV_SLOTS_DIR)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "node-local"))
    assert gpu_slots.resolve_slots_dir(None) == tmp_path / "node-local" / "kernelsweep-gpu-slots" / "slurm-4242"


# A `run --late` command: warms up (here: sleeps) holding only its place in the
# device's queue, then takes the device with timing_slot() and "times" on it.
LATE_CHILD = r"""
import json, os, sys, time
from kernelsweep.runtime import gpu_slots
log_dir, name, warm, hold = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
warm_start = time.time()
time.sleep(warm)
with gpu_slots.timing_slot(label=name) as waited:
    device_start = time.time()
    time.sleep(hold)
    device_end = time.time()
with open(os.path.join(log_dir, name + ".json"), "w") as f:
    json.dump({"slot": os.environ.get("KERNELSWEEP_GPU_SLOT"), "warm_start": warm_start,
               "device_start": device_start, "device_end": device_end, "waited": waited,
               "queue_fd_left": gpu_slots.ENV_QUEUE_FD in os.environ}, f)
"""


def test_late_commands_warm_up_while_another_times_and_never_share_the_device(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    cmd = [*WRAPPER, "--slots-dir", str(tmp_path / "slots"), "--gpus", "1", "--late", "--queue", "1", "--",
           sys.executable, "-c", LATE_CHILD, str(logs)]
    procs = [subprocess.Popen([*cmd, f"job{i}", "0.4", "0.6"], env=clean_env(), stderr=subprocess.PIPE, text=True)
             for i in range(4)]
    finish(procs, timeout=120)
    recs = sorted(records(logs), key=lambda r: r["device_start"])
    assert len(recs) == 4 and all(r["slot"] == "0" and r["waited"] is not None for r in recs)
    assert not any(r["queue_fd_left"] for r in recs)
    for before, after in zip(recs, recs[1:]):
        # One timing at a time on the device ...
        assert after["device_start"] >= before["device_end"], (before, after)
        # ... and one job warming up in the queue at a time: the next one starts
        # warming only once the one before it has taken the device.
        assert after["warm_start"] >= before["device_start"] - 0.05, (before, after)
    # The point of the queue: a job warmed up while the one before it timed.
    assert any(after["warm_start"] < before["device_end"] for before, after in zip(recs, recs[1:]))


def test_a_deeper_queue_keeps_the_device_busy_when_warming_up_takes_longer_than_timing(tmp_path):
    """Each job warms up for 1.5 s and holds the device for 0.3 s. With one queue
    place the device idles ~1.2 s between jobs; with three, jobs warm up side by
    side, the device passes from one to the next without a gap, and no more than
    three warm up at once."""
    logs = tmp_path / "logs"
    logs.mkdir()
    cmd = [*WRAPPER, "--slots-dir", str(tmp_path / "slots"), "--gpus", "1", "--late", "--queue", "3", "--",
           sys.executable, "-c", LATE_CHILD, str(logs)]
    procs = [subprocess.Popen([*cmd, f"job{i}", "1.5", "0.3"], env=clean_env(), stderr=subprocess.PIPE, text=True)
             for i in range(6)]
    finish(procs, timeout=120)
    recs = sorted(records(logs), key=lambda r: r["device_start"])
    assert len(recs) == 6
    for before, after in zip(recs, recs[1:]):
        assert after["device_start"] >= before["device_end"], (before, after)  # still one timing at a time
    # Three warmed up together, so the second and third found the device's turn ready:
    # they took it at once when the one before let go (a one-place queue would leave ~1.2 s gaps).
    gaps = [after["device_start"] - before["device_end"] for before, after in zip(recs, recs[1:])]
    assert sorted(gaps)[len(gaps) // 2] < 0.5, gaps
    # Never more than the three places (and the holder) at once: a warm start needs a free place.
    for r in recs:
        warming = [o for o in recs if o["warm_start"] <= r["warm_start"] < o["device_start"] and o is not r]
        assert len(warming) <= 2, (r, warming)


def test_late_is_ignored_on_the_cpu_slot(tmp_path):
    """CPU timing shares cores with whatever warms up: a late CPU command holds
    the slot from its start, and timing_slot() has nothing to take."""
    logs = tmp_path / "logs"
    logs.mkdir()
    cmd = [*WRAPPER, "--slots-dir", str(tmp_path / "slots"), "--gpus", "cpu", "--late", "--",
           sys.executable, "-c", LATE_CHILD, str(logs)]
    finish([subprocess.Popen([*cmd, f"job{i}", "0.3", "0.3"], env=clean_env(), stderr=subprocess.PIPE, text=True)
            for i in range(2)])
    recs = sorted(records(logs), key=lambda r: r["warm_start"])
    assert [r["waited"] for r in recs] == [None, None]
    assert recs[1]["warm_start"] >= recs[0]["device_end"]
