"""An evaluation under `gpu-slots run --late` takes the device only once its
workers are warm: here on the CPU target, with the device's lock named by hand
and held by the test, as the job before it would hold it while timing."""

from __future__ import annotations

import fcntl
import os
import threading
import time

from kernelsweep import gpu_slots
from kernelsweep.verdict import SUCCESS_CATEGORIES

HOLD_S = 5.0


def test_an_evaluation_warms_up_then_waits_for_the_device(run_eval, cpu_library, tmp_path, monkeypatch):
    lock = tmp_path / "slots" / "gpu0.lock"
    lock.parent.mkdir()
    monkeypatch.setenv(gpu_slots.ENV_TIMING_LOCK, str(lock))
    monkeypatch.setenv(gpu_slots.ENV_SLOT, "0")
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)  # the job before is timing
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(record=run_eval("add", "cpp_add")))
    job.start()
    time.sleep(HOLD_S)
    assert job.is_alive(), outcome  # no verdict without the device
    os.close(holder)
    job.join(600)
    r = outcome["record"]
    assert r["category"] in SUCCESS_CATEGORIES, (r["category"], r["error"])
    stages = r["stage_s"]
    assert stages["slot_wait"] > 0 and stages["warm"] > 0 and stages["device_held"] > 0, stages
    # Warming up and waiting both came before the work: the correctness and
    # timing stages run on the held device, after it was taken.
    assert stages["correctness"] + stages["timing"] <= stages["device_held"], stages
    assert stages["reference"] >= stages["warm"] + stages["slot_wait"], stages
    # The device is free again once the evaluation has returned.
    probe = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)


def test_without_late_claim_nothing_waits(run_eval, cpu_library, monkeypatch):
    monkeypatch.delenv(gpu_slots.ENV_TIMING_LOCK, raising=False)
    r = run_eval("add", "cpp_add")
    assert r["category"] in SUCCESS_CATEGORIES, (r["category"], r["error"])
    assert not {"warm", "slot_wait", "device_held"} & set(r["stage_s"]), r["stage_s"]
    assert {"reference", "candidate", "correctness", "timing"} <= set(r["stage_s"]), r["stage_s"]
