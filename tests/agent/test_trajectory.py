"""A whole trajectory with every guard at its default, the failure study's story
on the CPU: a working kernel, a test script run in the sandbox, a profile of the
candidate, a submission, then the broken "optimization" submitted twice. The
lock keeps the working submission; repeat_error stops the broken record."""

from __future__ import annotations

import json

import pytest

from agent_scripts import GOOD_KERNEL, block

pytestmark = pytest.mark.slow

BROKEN = GOOD_KERNEL.replace("        for (int64_t i = begin; i < end; ++i) {",
                             "        int idx = (int)begin; int batch_size = (int)end;\n"
                             "        if (idx batch_size) {}\n"
                             "        for (int64_t i = begin; i < end; ++i) {").replace("chain_cpu", "chain_cpu_v2")
TEST = '''import torch
from reference import Model, get_inputs, get_init_inputs
from model_new import ModelNew

torch.manual_seed(0)
ref, new = Model(*get_init_inputs()), ModelNew(*get_init_inputs())
x = get_inputs()
print("max abs diff", (ref(*x) - new(*x)).abs().max().item())
'''


def test_the_failure_story_with_default_guards(scenario):
    assert "if (idx batch_size)" in BROKEN
    scenario.script([f"<think>fuse the chain</think>\nAction: write_file\npath: model_new.py\n{block(GOOD_KERNEL)}",
                     f"Action: write_file\npath: test_kernel.py\n{block(TEST)}",
                     "Action: run\npath: test_kernel.py",
                     "Action: profile\ntarget: candidate",
                     "Action: submit",
                     f"Action: submit\n{block(BROKEN)}",
                     f"Action: submit\n{block(BROKEN)}",
                     "Action: submit"])
    final = scenario.run(goal="none")
    assert scenario.kinds() == [
        "start", "model", "tool:write_file", "model", "tool:write_file", "model", "tool:run", "model",
        "tool:profile", "model", "tool:submit", "model", "tool:submit", "guard:regression_lock:kept_best",
        "model", "tool:submit", "guard:regression_lock:kept_best", "guard:repeat_error:stop",
        "end:guard:repeat_error"]
    tools = {r["step"]: r for r in scenario.records() if r["kind"] == "tool"}
    assert tools[2]["ok"] and "max abs diff 0.0" in tools[2]["observation"], tools[2]["observation"]
    assert tools[3]["ok"] and tools[3]["observation"].startswith("Candidate profile"), tools[3]["observation"]
    assert [tools[s]["data"]["eval"]["category"] for s in (5, 6)] == ["compile_error", "compile_error"]
    assert final["react"]["chosen_submission"] == 1 and final["result"]["category"].startswith("correct_")
    assert final["react"]["guards"] == {"regression_lock": 2, "repeat_error": 1}
    assert final["llm_calls"] == 7
    saved = json.loads((scenario.cell / "t0/c0/eval.json").read_text())
    assert saved["custom_kernel"] and saved["react"]["submission"] == 1
