"""Isolation: hangs, floods, stray processes and killed builds cost one
candidate, and the next evaluation is unaffected."""

from __future__ import annotations

import os
import random
import textwrap
from pathlib import Path

import pytest
from evaluator_paths import LIBRARY_CANDIDATE, REFERENCES

from kernelsweep.core.verdict import SUCCESS_CATEGORIES
from kernelsweep.evaluator import HarnessError, evaluate, settings
from kernelsweep.evaluator.sandbox import CappedLog

# The one flag a healthy candidate may get: informational, the loaded machine's, not the candidate's.
LOAD_FLAGS = {"timing_unstable"}


def _processes_with(marker: str) -> list[int]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(pid))
    return found


def test_hang_kills_the_whole_group_then_a_healthy_evaluation(run_eval, cpu_library, tmp_path):
    marker = f"{900 + random.random():.9f}"
    candidate = tmp_path / "hang_with_grandchild.py"
    candidate.write_text(textwrap.dedent(f"""
        import subprocess
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                subprocess.Popen(["sleep", "{marker}"])  # a grandchild that would outlive us
                while True:
                    pass
    """))
    r = run_eval("add", candidate, timeout_s=20.0)
    assert r["category"] == "timeout" and r["error"]["phase"] == "trials"
    assert _processes_with(marker) == []

    r = run_eval("add", "cpp_spin", timeout_s=20.0)  # a C++ loop holding the GIL
    assert r["category"] == "timeout"
    r = run_eval("slow_add", "cpp_add")  # its speed verdict is the loaded machine's (correct_unstable once)
    assert r["category"] in SUCCESS_CATEGORIES and r["custom_kernel"] and set(r["flags"]) <= LOAD_FLAGS, \
        (r["category"], r["flags"], r["speedup"])


@pytest.mark.parametrize("escape", ["start_new_session=True", "process_group=0"])
def test_a_process_that_leaves_the_group_is_killed_too(run_eval, tmp_path, escape):
    # A new session or group puts the sleeper outside the worker's process group, where a
    # group kill cannot reach it; left alive, it would keep the device busy under the
    # next candidate's timing. Confined, the worker is PID 1 of its own PID namespace and
    # the kernel kills everything in it with the worker (no stray is left to flag);
    # unconfined, the harness adopts such orphans and kills them (stray_processes).
    marker = f"{900 + random.random():.9f}"
    candidate = tmp_path / "escapes_the_group.py"
    candidate.write_text(textwrap.dedent(f"""
        import os
        import subprocess
        import torch.nn as nn

        class ModelNew(nn.Module):
            def forward(self, a, b):
                # double fork: the sleeper's parent exits, so it is nobody's child
                if os.fork() == 0:
                    subprocess.Popen(["sleep", "{marker}"], {escape})
                    os._exit(0)
                os.wait()
                return a + b
    """))
    r = run_eval("add", candidate)
    assert r["category"] == "no_custom_kernel"
    assert ("stray_processes" in r["flags"]) == (r["provenance"]["confinement"] == "none")
    assert _processes_with(marker) == []
    r = run_eval("add", "pytorch_only")  # the next candidate runs as usual and is not blamed
    assert r["category"] == "no_custom_kernel" and "stray_processes" not in r["flags"]


def test_crash_then_a_healthy_evaluation(run_eval, cpu_library):
    """The crash leaves nothing behind: the next candidate is built, judged
    correct and a custom kernel, with no flag. (Its speed verdict is the
    machine's: ten timed calls on two loaded cores gave correct_unstable once.)"""
    assert run_eval("add", "cpp_segv")["category"] == "crash"
    r = run_eval("slow_add", "cpp_add")
    assert r["category"] in SUCCESS_CATEGORIES and r["custom_kernel"] and set(r["flags"]) <= LOAD_FLAGS, \
        (r["category"], r["flags"], r["speedup"])


def test_output_flood_is_capped(run_eval, tmp_path):
    r = run_eval("add", "flood")
    assert r["category"] == "no_custom_kernel"  # it prints 128 MiB and closes its pipes, then works
    log = tmp_path / "logs" / "candidate.log"
    assert log.stat().st_size < settings.LOG_CAP_BYTES + 1024
    assert "bytes of output omitted" in log.read_text(errors="replace")


def test_a_build_killed_at_the_compile_limit_leaves_no_lock(run_eval, tmp_path):
    # A library source of its own (a fresh build); the torch header alone takes longer than 2 s.
    # A build cache of its own too: the shared one holds the locks of builds under way.
    text = LIBRARY_CANDIDATE.read_text().replace("// Never returns", f"// variant {random.random()}\n// Never returns")
    candidate = tmp_path / "slow_build.py"
    candidate.write_text(text)
    r = run_eval("add", candidate, compile_timeout_s=2.0, build_dir=tmp_path / "build")
    assert r["category"] == "timeout" and "compile" in r["error"]["message"]
    assert r["compiled"] is False
    locks = list((tmp_path / "build" / "ext").glob("*/lock"))
    assert locks == [], locks


def test_a_broken_reference_is_a_harness_error(build_dir, tmp_path):
    with pytest.raises(HarnessError, match="reference failed"):
        evaluate(REFERENCES / "broken.py", LIBRARY_CANDIDATE.with_name("pytorch_only.py"), device="cpu",
                 trials=2, timing_trials=5, warmup=1, build_dir=build_dir, log_dir=tmp_path)


def test_capped_log_keeps_head_and_tail(tmp_path):
    log = CappedLog(tmp_path / "x.log", cap=4096)
    log.write(b"HEAD" + b"a" * 3000)
    for _ in range(100):
        log.write(b"b" * 1000)
    log.write(b"TAIL")
    log.close()
    text = (tmp_path / "x.log").read_text()
    assert text.startswith("HEAD") and text.endswith("TAIL")
    assert "bytes of output omitted" in text and len(text) < 4096 + 100
    assert log.total == 3004 + 100_000 + 4
