"""An evaluation under `gpu-slots run --late` takes the device only once its
workers are warm: here on the CPU target, with the device's lock named by hand
and held by the test, as the job before it would hold it while timing."""

from __future__ import annotations

import fcntl
import os
import threading
import time
from pathlib import Path

import pytest
from evaluator_paths import CPU, REFERENCES

from kernelsweep.runtime import gpu_slots
from kernelsweep.core.verdict import SUCCESS_CATEGORIES

# Longer than the candidate's warm-up on two loaded cores (5.5 s once in CI, with the
# guard's snapshot of the dispatcher's tables): the evaluation must wait for the device.
HOLD_S = 10.0


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


def _hold(lock) -> int:
    lock.parent.mkdir(exist_ok=True)
    holder = os.open(lock, os.O_RDWR | os.O_CREAT)
    fcntl.flock(holder, fcntl.LOCK_EX)
    return holder


def _noting_reference(tmp_path, fixture: str, monkeypatch):
    """A copy of a fixture reference whose Model notes each construction in
    `built`, and the device's lock held as the job before would hold it."""
    built = tmp_path / "built"
    reference = tmp_path / f"{Path(fixture).stem}_built_late.py"
    reference.write_text((REFERENCES / fixture).read_text().replace(
        "        super().__init__()\n",
        f"        super().__init__()\n        open({str(built)!r}, 'a').write('constructed\\n')\n"))
    lock = tmp_path / "slots" / "gpu0.lock"
    monkeypatch.setenv(gpu_slots.ENV_TIMING_LOCK, str(lock))
    monkeypatch.setenv(gpu_slots.ENV_SLOT, "0")
    return reference, built, lock, _hold(lock)


def _wait_until_built(built, job: threading.Thread) -> None:
    deadline = time.monotonic() + 120
    while not built.exists() and job.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert built.exists(), "Model was not constructed while the device was held by another job"


def test_the_reference_is_built_on_the_host_before_the_device_is_taken(build_dir, tmp_path, monkeypatch):
    """A big reference model (L3-002: 2 G parameters) is constructed and saved
    while the job before still holds the device, not after."""
    from kernelsweep.evaluator import evaluate

    reference, built, _, holder = _noting_reference(tmp_path, "add.py", monkeypatch)
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(record=evaluate(
        reference, CPU / "pytorch_only.py", device="cpu", trials=2, timing_trials=4, warmup=1, timeout_s=120.0,
        build_dir=build_dir, log_dir=tmp_path / "logs")))
    job.start()
    try:
        _wait_until_built(built, job)
        assert job.is_alive(), outcome  # and no verdict without the device
    finally:
        os.close(holder)
    job.join(600)
    r = outcome["record"]
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])


def test_without_late_claim_nothing_waits(run_eval, cpu_library, monkeypatch):
    monkeypatch.delenv(gpu_slots.ENV_TIMING_LOCK, raising=False)
    r = run_eval("add", "cpp_add")
    assert r["category"] in SUCCESS_CATEGORIES, (r["category"], r["error"])
    assert not {"warm", "slot_wait", "device_held"} & set(r["stage_s"]), r["stage_s"]
    stages = r["stage_s"]
    assert {"reference", "candidate", "correctness", "timing"} <= set(stages), stages
    # The workers' own account of the correctness and compare stages (where a big output's time goes).
    assert stages["trials_calls"] + stages["trials_save"] <= stages["correctness"], stages
    assert stages["reference_keep"] <= stages["reference_trials"] <= stages["correctness"], stages
    assert stages["compare_load"] + stages["compare_values"] <= stages["compare"], stages


def test_a_worker_account_of_its_seconds_is_taken_only_as_named_bounded_numbers():
    from types import SimpleNamespace

    from kernelsweep.evaluator.evaluation import Evaluation
    ev = SimpleNamespace(stage_s={"trials_save": 1.0})
    forged = {"seconds": {"save": 2.5, "calls": -3.0, "device_held": 0.0, "load": float("nan")}}
    Evaluation.add_seconds(ev, "trials", forged, ("calls", "save", "load"))
    Evaluation.add_seconds(ev, "trials", {"seconds": ["save", 9]}, ("save",))
    Evaluation.add_seconds(ev, "trials", {"seconds": {"save": True}}, ("save",))
    assert ev.stage_s == {"trials_save": 3.5}


def test_baselines_build_the_model_before_the_device_is_taken_and_take_it_for_each_mode(tmp_path, monkeypatch):
    """A baseline job under the late claim: the first mode's worker constructs
    Model while the job before still holds the device; each mode then takes
    the device once its worker is warm and gives it back at its worker's exit,
    and the modes come back in order (a mode failing at its limit costs only
    that mode)."""
    from kernelsweep.evaluator.baseline import run_baseline

    reference, built, lock, holder = _noting_reference(tmp_path, "compile_sleeps.py", monkeypatch)
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(record=run_baseline(
        reference, device="cpu", modes=["eager", "inductor-default", "inductor-reduce-overhead"],
        timing_trials=4, warmup=1, timeout_s=20.0, log_dir=tmp_path / "logs")))
    job.start()
    try:
        _wait_until_built(built, job)
        time.sleep(1.0)
        assert job.is_alive(), outcome  # no timing without the device
    finally:
        os.close(holder)
    job.join(300)
    r = outcome["record"]
    modes = r["modes"]
    assert list(modes) == ["eager", "inductor-default", "inductor-reduce-overhead"], modes
    assert modes["eager"]["status"] == "ok" and modes["eager"]["runtime_ms"]["n"] == 4, modes["eager"]
    assert modes["inductor-default"]["status"] == "failed" and "time limit" in modes["inductor-default"]["error"]
    assert modes["inductor-reduce-overhead"]["status"] == "skipped"
    assert built.read_text().count("constructed") == 2  # one Model per timed mode, none for the skipped one
    stages = r["stage_s"]
    assert stages["slot_wait"] > 0.5 and stages["warm"] > 0 and stages["device_held"] > 0, stages
    # Both timed modes ran on the held device: the failing one until its 20 s limit, less its start-up
    # (the compiler's imports and compile workers) and its wait for eager's turn, which count toward it.
    assert modes["inductor-default"]["stage_s"]["held"] >= 5.0, modes["inductor-default"]
    eager = modes["eager"]["stage_s"]
    assert {"device", "inputs", "timing", "held", "slot_wait"} <= set(eager), eager
    assert eager["device"] + eager["inputs"] + eager["timing"] <= eager["held"] <= stages["device_held"], eager
    held = eager["held"] + modes["inductor-default"]["stage_s"]["held"]
    assert abs(stages["device_held"] - held) < 0.01, stages  # the job held the device only in its modes' turns
    assert not any(k.startswith(("held_", "slot_wait_")) for k in stages), stages
    probe = os.open(lock, os.O_RDWR)
    try:
        fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(probe)


SLOW_COMPILE_WORKER = """
import fcntl, os, time
import torch
import torch.nn as nn


class Model(nn.Module):
    \"\"\"Built at once for eager; a compile mode's worker (its folder is named
    after its mode) is still building it once eager's worker has timed and
    exited, and notes whether the device's lock was free meanwhile.\"\"\"

    def __init__(self):
        super().__init__()
        if "inductor" not in os.getcwd():
            return
        while not os.path.exists(__DONE__):  # eager's last forward
            time.sleep(0.05)
        deadline = time.monotonic() + 30
        seen = "held"
        while seen == "held" and time.monotonic() < deadline:
            fd = os.open(__LOCK__, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                seen = "free"
            except OSError:
                time.sleep(0.05)
            finally:
                os.close(fd)
        open(__NOTE__, "w").write(seen)

    def forward(self, x):
        if not torch.compiler.is_compiling() and "inductor" not in os.getcwd():
            open(__DONE__, "a").close()
        return x * 2


def get_inputs():
    return [torch.randn(16, 16)]


def get_init_inputs():
    return []
"""


def test_a_baseline_gives_the_device_back_while_its_next_mode_still_warms(tmp_path, monkeypatch):
    """Eager's turn ends at its worker's exit; the compile mode's worker, still
    building its model then, finds the device's lock free (another job may
    time meanwhile), and its own turn comes once it is warm."""
    from kernelsweep.evaluator.baseline import run_baseline

    lock, note, done = tmp_path / "slots" / "gpu0.lock", tmp_path / "note", tmp_path / "eager_done"
    reference = tmp_path / "slow_compile_worker.py"
    reference.write_text(SLOW_COMPILE_WORKER.replace("__DONE__", repr(str(done))).replace("__LOCK__", repr(str(lock)))
                         .replace("__NOTE__", repr(str(note))))
    monkeypatch.setenv(gpu_slots.ENV_TIMING_LOCK, str(lock))
    monkeypatch.setenv(gpu_slots.ENV_SLOT, "0")
    os.close(_hold(lock))  # the lock file exists, nobody holds it
    r = run_baseline(reference, device="cpu", modes=["eager", "inductor-default"], timing_trials=4, warmup=1,
                     timeout_s=120.0, log_dir=tmp_path / "logs")
    assert note.read_text() == "free", "the device stayed held while the compile mode's worker warmed"
    modes = r["modes"]
    assert [m["status"] for m in modes.values()] == ["ok", "ok"], modes
    held = sum(m["stage_s"]["held"] for m in modes.values())
    assert abs(r["stage_s"]["device_held"] - held) < 0.01, r["stage_s"]


def test_the_candidate_builds_its_model_while_the_reference_computes_its_trials(build_dir, tmp_path):
    """ModelNew is constructed while the reference runs its trials (each 1 s
    here), not after: its 2 s construction ends before the reference's ready,
    so the parent hardly waits for it; the weights it loads were all written."""
    from kernelsweep.evaluator import evaluate

    reference = tmp_path / "slow_trials.py"
    reference.write_text((REFERENCES / "add.py").read_text().replace(
        "        return a + b", "        import time\n        time.sleep(1.0)\n        return a + b").replace(
        "        super().__init__()\n", "        super().__init__()\n        self.scale = nn.Parameter(torch.ones(64))\n"))
    candidate = tmp_path / "slow_init.py"
    candidate.write_text(
        "import time\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.scale = nn.Parameter(torch.zeros(64))\n"
        "        time.sleep(2.0)\n\n    def forward(self, a, b):\n        time.sleep(1.0)  # as slow as the reference\n"
        "        return torch.add(a, b)\n")
    r = evaluate(reference, candidate, device="cpu", trials=5, timing_trials=4, warmup=1, timeout_s=120.0,
                 build_dir=build_dir, log_dir=tmp_path / "logs", shape_variants=0)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    stages = r["stage_s"]
    assert stages["reference_trials"] >= 3.0, stages
    assert stages["construct"] < 1.0, stages


def test_the_device_is_taken_only_once_the_reference_is_built(build_dir, tmp_path, monkeypatch):
    """The device free, a reference whose Model takes 4 s to build on the host:
    the evaluation takes the device only after that (its worker says it is warm
    once built), so the build is in `warm`, never in `device_held`."""
    from kernelsweep.evaluator import evaluate

    reference = tmp_path / "slow_build.py"
    reference.write_text((REFERENCES / "add.py").read_text().replace(
        "        super().__init__()\n", "        super().__init__()\n        import time\n        time.sleep(4.0)\n"))
    lock = tmp_path / "slots" / "gpu0.lock"
    lock.parent.mkdir()
    monkeypatch.setenv(gpu_slots.ENV_TIMING_LOCK, str(lock))
    monkeypatch.setenv(gpu_slots.ENV_SLOT, "0")
    r = evaluate(reference, CPU / "pytorch_only.py", device="cpu", trials=2, timing_trials=4, warmup=1,
                 timeout_s=120.0, build_dir=build_dir, log_dir=tmp_path / "logs", shape_variants=0)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    stages = r["stage_s"]
    assert stages["warm"] >= 4.0, stages
    assert stages["warm"] + stages["slot_wait"] + stages["device_held"] <= stages["reference"] + 0.5, stages


def _late(tmp_path, monkeypatch, *, held: bool) -> int | None:
    """The late claim on the CPU target; the device's lock held by the test
    (as the job before would hold it while timing) when `held`."""
    lock = tmp_path / "slots" / "gpu0.lock"
    monkeypatch.setenv(gpu_slots.ENV_TIMING_LOCK, str(lock))
    monkeypatch.setenv(gpu_slots.ENV_SLOT, "0")
    holder = _hold(lock)
    if held:
        return holder
    os.close(holder)
    return None


def _evaluate(candidate, tmp_path, build_dir, reference=REFERENCES / "add.py", shape_variants=0):
    from kernelsweep.evaluator import evaluate

    return evaluate(reference, candidate, device="cpu", trials=2, timing_trials=4, warmup=1, timeout_s=120.0,
                    build_dir=build_dir, log_dir=tmp_path / "logs", shape_variants=shape_variants)


FAILS_ON_THE_HOST = {
    "import": "import torch\nimport torch.nn as nn\n\nWIDTH = in_features * 2\n\n\nclass ModelNew(nn.Module):\n"
              "    def forward(self, a, b):\n        return a + b\n",
    "construct": "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def __init__(self):\n"
                 "        super().__init__()\n        self.act = torch.autograd.Function.apply\n"
                 "        nn.Sequential(self.act)\n\n    def forward(self, a, b):\n        return a + b\n",
}


@pytest.mark.parametrize("where", sorted(FAILS_ON_THE_HOST))
def test_a_candidate_failing_on_the_host_gets_its_verdict_without_the_device(where, build_dir, tmp_path,
                                                                              monkeypatch):
    """A candidate whose import or ModelNew construction fails (most of a 7B
    model's do) is judged while the job before still holds the device, with
    the verdict it gets without the late claim."""
    candidate = tmp_path / f"fails_at_{where}.py"
    candidate.write_text(FAILS_ON_THE_HOST[where])
    monkeypatch.delenv(gpu_slots.ENV_TIMING_LOCK, raising=False)
    plain = _evaluate(candidate, tmp_path, build_dir)
    holder = _late(tmp_path, monkeypatch, held=True)
    try:
        late = _evaluate(candidate, tmp_path, build_dir)  # returns with the device's lock still held
    finally:
        os.close(holder)
    assert plain["category"] not in SUCCESS_CATEGORIES and plain["error"]["phase"] == where, plain["error"]
    assert (late["category"], late["error"]["type"], late["error"]["phase"]) == \
        (plain["category"], plain["error"]["type"], plain["error"]["phase"]), (late["error"], plain["error"])
    assert late["stage_s"]["device_held"] == 0 and late["stage_s"]["slot_wait"] == 0, late["stage_s"]


def test_the_candidate_builds_its_model_before_the_device_is_taken(build_dir, tmp_path, monkeypatch):
    """ModelNew's 3 s construction (L3-002's: 14-19 s) happens while the
    evaluation warms up, so the device is never held for it."""
    candidate = tmp_path / "slow_init.py"
    candidate.write_text(
        "import time\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        time.sleep(3.0)\n\n"
        "    def forward(self, a, b):\n        return torch.add(a, b)\n")
    _late(tmp_path, monkeypatch, held=False)
    r = _evaluate(candidate, tmp_path, build_dir)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    stages = r["stage_s"]
    assert stages["warm"] >= 3.0 and stages["construct"] < 1.0, stages


# A candidate whose ModelNew takes 1.5 s to construct, against a reference with shape
# variants: {case: (its source, the reference, the sizes each variant is checked at
# (None: every size rescaled), what a narrowed variant says)}.
SLOW_INIT_VARIANTS = {
    "every_size_rescaled": (
        "import time\nimport torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        time.sleep(1.5)\n\n"
        "    def forward(self, a, b):\n        return torch.add(a, b)\n",
        "add_sized.py", None, None),
    # the reference's Model cannot be built with every size rescaled (a channel count
    # nn.GroupNorm refuses): built with its batch alone rescaled, in the preparation too
    "narrowed_at_construction": (
        "import time\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, channels, num_groups):\n        super().__init__()\n"
        "        self.norm = nn.GroupNorm(num_groups, channels)\n        time.sleep(1.5)\n\n"
        "    def forward(self, x):\n        return self.norm(x)\n",
        "groupnorm_sized.py", [{"batch_size": 9}, {"batch_size": 21}], "must be divisible"),
}


@pytest.mark.parametrize("case", sorted(SLOW_INIT_VARIANTS))
def test_the_variants_models_are_built_before_the_device_is_taken(case, build_dir, tmp_path, monkeypatch):
    """Each shape variant's ModelNew (and Model) is built in the workers'
    preparation too, at the sizes the variant is checked at: of three 1.5 s
    constructions none holds the device."""
    source, reference, sizes, narrowed = SLOW_INIT_VARIANTS[case]
    candidate = tmp_path / f"slow_init_{case}.py"
    candidate.write_text(source)
    _late(tmp_path, monkeypatch, held=False)
    r = _evaluate(candidate, tmp_path, build_dir, reference=REFERENCES / reference, shape_variants=2)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    checked = r["variants"]["checked"]
    assert [c["name"] for c in checked] == ["smaller_odd", "larger_odd"], r["variants"]
    assert all(c["ok"] and c["built_ahead"] for c in checked), checked
    if sizes is not None:
        assert [c["constants"] for c in checked] == sizes, r["variants"]
        assert all(narrowed in c["narrowed"] for c in checked), checked
    stages = r["stage_s"]
    assert stages["warm"] >= 4.5 and stages["variants"] < 1.5, stages


def test_the_float64_twin_is_made_before_the_device_is_taken(build_dir, tmp_path, monkeypatch):
    """Under the default tolerance profile the reference's float64 twin (a
    widened copy of Model) is made in the preparation: a copy that takes 1.5 s
    holds no device."""
    reference = tmp_path / "slow_copy.py"
    reference.write_text(
        "import copy\nimport time\nimport torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.scale = nn.Parameter(torch.ones(1))\n\n"
        "    def __deepcopy__(self, memo):  # as a big model's copy would take\n        time.sleep(1.5)\n"
        "        twin = Model.__new__(Model)\n        twin.__dict__.update(copy.deepcopy(self.__dict__, memo))\n"
        "        return twin\n\n    def forward(self, a, b):\n        return (a + b) * self.scale\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 64), torch.randn(64, 64)]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    _late(tmp_path, monkeypatch, held=False)
    r = _evaluate(CPU / "pytorch_only.py", tmp_path, build_dir, reference=reference)
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    tolerance = r["tolerance"]
    assert tolerance["rounding"][0] > 0 and tolerance["rounding_trials"] == 2 + 1, tolerance  # every trial (one perturbed)
    stages = r["stage_s"]
    assert stages["warm"] >= 1.5 and stages["device_held"] < 1.5, stages


def test_a_build_that_depends_on_the_sizes_is_done_before_the_device_is_taken(build_dir, tmp_path, monkeypatch):
    """A candidate that compiles its sizes into its extension builds one per
    shape variant when executed with the variant's sizes: that build runs in
    the preparation too, with no compiler while the device is held."""
    _late(tmp_path, monkeypatch, held=False)
    r = _evaluate(CPU / "cpp_add_sized_build.py", tmp_path, build_dir, reference=REFERENCES / "add_sized.py",
                  shape_variants=1)
    assert r["category"] in SUCCESS_CATEGORIES and r["custom_kernel"], (r["category"], r["error"])
    (checked,) = r["variants"]["checked"]
    assert checked["ok"] and checked["built_ahead"], r["variants"]
    builds = {b["name"]: b for b in r["builds"]}
    variant_build = builds[f"ks_fixture_sized_{checked['constants']['dim']}"]
    assert variant_build["ok"] and not variant_build["in_hold"], r["builds"]
    assert r["build_in_hold_s"] == 0.0, r["builds"]


GATE_HOLD_S = 12.0
STARTS_CUDA_AT_IMPORT = """
import time
import torch
import torch.nn as nn

_started = time.monotonic()
try:
    torch.zeros(1, device="cuda")
except Exception:  # a CPU-only torch: the attempt is what the gate holds back
    pass
WAITED = time.monotonic() - _started


class ModelNew(nn.Module):
    def forward(self, a, b):
        return a + b if WAITED >= 2.0 else a - b  # right only if the attempt waited for the device
"""


def test_candidate_code_starting_cuda_before_the_device_is_taken_waits_for_it(build_dir, tmp_path, monkeypatch):
    """The device gate: a candidate touching CUDA at import, while the job
    before holds the device, is held back until the device is taken (then it
    runs on), and the evaluation does not wait for its import to take it."""
    candidate = tmp_path / "cuda_at_import.py"
    candidate.write_text(STARTS_CUDA_AT_IMPORT)
    holder = _late(tmp_path, monkeypatch, held=True)
    outcome: dict = {}
    job = threading.Thread(target=lambda: outcome.update(record=_evaluate(candidate, tmp_path, build_dir)))
    job.start()
    try:
        time.sleep(GATE_HOLD_S)
        assert job.is_alive(), outcome
    finally:
        os.close(holder)
    job.join(600)
    r = outcome["record"]
    assert r["category"] == "no_custom_kernel", (r["category"], r["error"])
    assert r["stage_s"]["slot_wait"] > 2.0, r["stage_s"]  # it said hello while its import waited at the gate


FORGES_A_FAILED_HELLO = """
import gc
import json
import os

import torch
import torch.nn as nn


def _channels():  # by class name: a getattr on every object would start CUDA (and wait at the gate)
    for obj in gc.get_objects():
        if type(obj).__name__ == "Channel":
            yield obj._nonce, obj._fd


for _nonce, _fd in dict.fromkeys(_channels()):  # at import: "my preparation failed"
    os.write(_fd, (json.dumps({"nonce": _nonce, "kind": "hello", "prepared": "failed"}) + "\\n").encode())


class ModelNew(nn.Module):
    def forward(self, a, b):
        return torch.add(a, b)
"""


def test_a_forged_hello_is_a_cheat_not_a_hang(build_dir, tmp_path, monkeypatch):
    """A candidate saying "hello, my preparation failed" on its worker's channel
    (found through gc) before its worker does: the parent judges it without the
    device, the reference is let go at once, and the candidate's second hello
    and successful setup show the first was not its own."""
    candidate = tmp_path / "forged_hello.py"
    candidate.write_text(FORGES_A_FAILED_HELLO)
    holder = _late(tmp_path, monkeypatch, held=True)
    try:
        r = _evaluate(candidate, tmp_path, build_dir)  # returns with the device's lock still held
    finally:
        os.close(holder)
    assert r["category"] == "cheat" and "report_tampered" in r["flags"], (r["category"], r["flags"], r["error"])
    assert r["stage_s"]["device_held"] == 0, r["stage_s"]
