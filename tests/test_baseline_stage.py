"""`kernelsweep baseline-task`, the baseline stage as the study runs it: a timing the machine failed (the
worker killed from outside) writes nothing and fails the job; a good reference
is timed and recorded as before."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

REFERENCE = """
import os, signal, torch
class Model(torch.nn.Module):
    def forward(self, x):
        {body}
def get_inputs(): return [torch.randn(64)]
def get_init_inputs(): return []
"""


def baseline(tmp_path, body):
    ref = tmp_path / "ref.py"
    ref.write_text(textwrap.dedent(REFERENCE.format(body=body)))
    out = tmp_path / "baseline.json"
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "baseline-task", str(ref), "--device", "cpu",
                           "--modes", "eager", "--timing-trials", "3", "--warmup", "1", "--timeout", "120",
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    return proc, out


def test_worker_killed_from_outside_records_nothing(tmp_path):
    proc, out = baseline(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")
    assert proc.returncode == 3, proc.stderr
    assert "the machine failed the timing, nothing was recorded: eager" in proc.stderr
    assert "Rerun the same command" in proc.stderr and not out.exists()


def test_good_reference_is_timed_and_recorded(tmp_path):
    proc, out = baseline(tmp_path, "return x * 2")
    assert proc.returncode == 0, proc.stderr
    record = json.loads(out.read_text())
    assert record["modes"]["eager"]["status"] == "ok" and record["modes"]["eager"]["runtime_ms"]["median"] > 0
