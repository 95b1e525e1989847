"""A trajectory killed mid-step resumes from its trace without a second model
call for any recorded reply; a finished trajectory is never rerun."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from agent_scripts import block, broken

SLEEPER = "import os, time\nopen('pid.txt', 'w').write(str(os.getpid()))\ntime.sleep(120)\n"


def _running(word: str) -> list[int]:
    """Live processes (as this namespace sees them) whose command line holds WORD:
    the confined script reports its own PID in its PID namespace, not ours."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if word.encode() in cmdline and state != "Z":
            found.append(int(entry))
    return found


def _wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_killed_mid_trajectory_resumes_without_repeating_a_model_call(scenario):
    scenario.script([f"Action: write_file\npath: sleeper.py\n{block(SLEEPER)}",
                     "Action: run\npath: sleeper.py",
                     f"Action: submit\n{block(broken(1))}"])
    spec = scenario.spec(max_steps=3, run_timeout_s=6)
    spec_file = scenario.root / "spec.json"
    spec_file.write_text(json.dumps(spec))
    argv = [sys.executable, "-m", "kernelsweep", "react", "--spec", str(spec_file), "--task", str(scenario.task),
            "--reference", str(scenario.reference), "--cell-dir", str(scenario.cell),
            "--out", str(scenario.cell / "final.json")]
    proc = subprocess.Popen(argv, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pid_file = scenario.cell / "react/workspace/pid.txt"
    try:
        _wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), 60, "the agent's script to start")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    sleeper = str(scenario.cell / "react/workspace/sleeper.py")
    _wait_for(lambda: not _running(sleeper), 5, "the agent's script to die with the agent")
    assert scenario.kinds() == ["start", "model", "tool:write_file", "model"]  # killed inside run()

    # The replies already recorded are gone from the replay: asking for one again would fail.
    scenario.script([f"Action: submit\n{block(broken(1))}"], first_step=2)
    final = scenario.run(max_steps=3, run_timeout_s=6)
    assert scenario.kinds() == ["start", "model", "tool:write_file", "model", "tool:run", "model", "tool:submit",
                                "end:limit:max_steps"]
    models = [r for r in scenario.records() if r["kind"] == "model"]
    assert [m["step"] for m in models] == [0, 1, 2]
    run = next(r for r in scenario.records() if r["kind"] == "tool" and r["name"] == "run")
    assert run["data"]["timed_out"] and "killed at the 6 s limit" in run["observation"]
    assert final["llm_calls"] == 3 and final["react"]["submissions"] == 1

    # Finished: nothing is rerun, no model is needed; the outputs are written again from the trace.
    scenario.replay.unlink()
    before = (scenario.cell / "react/trace.jsonl").read_text()
    (scenario.cell / "final.json").unlink()
    again = scenario.run(max_steps=3, run_timeout_s=6)
    assert (scenario.cell / "react/trace.jsonl").read_text() == before
    assert {k: again[k] for k in ("status", "stop_reason", "llm_calls")} == \
        {k: final[k] for k in ("status", "stop_reason", "llm_calls")}


def test_a_torn_last_line_is_dropped_and_a_changed_config_starts_afresh(scenario):
    scenario.script([f"Action: write_file\npath: model_new.py\n{block(broken(1))}", "Action: view_file\npath: ."])
    scenario.run(max_steps=1)
    path = scenario.cell / "react/trace.jsonl"
    records = path.read_text().splitlines()
    path.write_text("\n".join(records[:-1]) + "\n" + records[-1][: len(records[-1]) // 2])  # the end record, torn
    final = scenario.run(max_steps=1)
    assert scenario.kinds() == ["start", "model", "tool:write_file", "end:limit:max_steps"]
    assert final["llm_calls"] == 1
    final = scenario.run(max_steps=2)  # another experiment: the old trace is discarded
    assert scenario.kinds() == ["start", "model", "tool:write_file", "model", "tool:view_file", "end:limit:max_steps"]
    assert Path(scenario.cell / "react/workspace/model_new.py").exists()
