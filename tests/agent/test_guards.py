"""Every guard fires exactly when it should, on scripted trajectories with real
evaluations (replay model, C++ kernels on the CPU)."""

from __future__ import annotations

import json

from agent_scripts import GOOD_KERNEL, block, broken

OFF = {"repeat_error": None, "force_profile": None, "regression_lock": False, "max_submissions": None}


def test_repeat_error_stops_at_the_kth_identical_error_only(scenario):
    # Two different syntax errors, then the first again on another line: identical once normalised.
    other = "import torch\nclass ModelNew(nn.Module):\n  def f(self):\n      x = 1\n    return x\n"
    scenario.script([f"Action: evaluate\n{block(broken(1))}",
                     f"Action: evaluate\n{block(other)}",
                     f"Action: evaluate\n{block(broken(5))}",
                     "Action: submit"])
    final = scenario.run(**{**OFF, "repeat_error": 2})
    assert scenario.kinds() == ["start", "model", "tool:evaluate", "model", "tool:evaluate", "model",
                                "tool:evaluate", "guard:repeat_error:stop", "end:guard:repeat_error"]
    keys = [r["error_key"] for r in scenario.records() if r["kind"] == "tool"]
    assert keys[0] == keys[2] != keys[1]
    assert final["react"]["guards"] == {"repeat_error": 1}
    assert final["status"] == "no_candidate" and final["stop_reason"] == "guard:repeat_error"


def test_repeat_error_inject_tells_the_agent_and_counts_afresh(scenario):
    scenario.script([f"Action: evaluate\n{block(broken(i))}" for i in range(5)])
    scenario.run(**{**OFF, "repeat_error": 2, "repeat_error_action": "inject", "max_steps": 5})
    kinds = scenario.kinds()
    # fires after the 2nd and the 4th identical error (the count restarts after a firing), never stops
    assert [i for i, k in enumerate(kinds) if k.startswith("guard")] == [5, 10]
    assert kinds[-1] == "end:limit:max_steps"
    guard = next(r for r in scenario.records() if r["kind"] == "guard")
    assert "same error" in guard["message"]
    calls = sorted((scenario.cell / "react/calls").glob("step*.json"))
    assert len(calls) == 5


def test_force_profile_blocks_edits_until_a_profile_ran(scenario):
    scenario.script([f"Action: evaluate\n{block(broken(1))}",
                     f"Action: evaluate\n{block(broken(2))}",      # 2nd failed attempt: the guard engages
                     f"Action: write_file\npath: model_new.py\n{block(broken(3))}",   # refused
                     "Action: profile\ntarget: reference",
                     f"Action: write_file\npath: model_new.py\n{block(broken(4))}"])  # accepted
    final = scenario.run(**{**OFF, "force_profile": 2, "max_steps": 5})
    assert scenario.kinds() == ["start", "model", "tool:evaluate", "model", "tool:evaluate",
                                "guard:force_profile:engaged", "model", "tool:write_file",
                                "guard:force_profile:blocked", "model", "tool:profile", "model", "tool:write_file",
                                "end:limit:max_steps"]
    tools = [r for r in scenario.records() if r["kind"] == "tool"]
    assert tools[2]["blocked_by"] == "force_profile" and tools[2]["mutation"] is None
    assert tools[3]["ok"], tools[3]["observation"]
    assert tools[4]["ok"] and tools[4]["mutation"]["content"] == broken(4)
    assert (scenario.cell / "react/workspace/model_new.py").read_text() == broken(4)
    assert final["react"]["guards"] == {"force_profile": 2}


def _regression_script(scenario):
    scenario.script([f"Action: write_file\npath: model_new.py\n{block(GOOD_KERNEL)}",
                     "Action: submit",
                     f"Action: submit\n{block(broken(1))}",   # a worse submission
                     "Action: submit"])                       # never reached: the cap stops first


def test_regression_lock_keeps_the_best_submission_and_cap_stops(scenario):
    _regression_script(scenario)
    final = scenario.run(**{**OFF, "regression_lock": True, "max_submissions": 2, "goal": "none"})
    assert scenario.kinds() == ["start", "model", "tool:write_file", "model", "tool:submit", "model", "tool:submit",
                                "guard:regression_lock:kept_best", "guard:max_submissions:stop",
                                "end:guard:max_submissions"]
    assert final["react"]["submission_categories"][1] == "syntax_error"
    first = final["react"]["submission_categories"][0]
    assert first.startswith("correct_"), first
    assert final["react"]["chosen_submission"] == 1 and final["result"]["category"] == first
    saved = json.loads((scenario.cell / "t0/c0/eval.json").read_text())
    assert saved["category"] == first and saved["react"]["submission"] == 1
    assert (scenario.cell / "t0/c0/candidate.py").read_text() == GOOD_KERNEL
    assert final["llm_calls"] == 3 and final["candidates_evaluated"] == 1


def test_without_the_lock_the_last_submission_is_the_result(scenario):
    _regression_script(scenario)
    final = scenario.run(**{**OFF, "max_submissions": 2, "goal": "none"})
    assert "guard:regression_lock:kept_best" not in scenario.kinds()
    assert final["react"]["chosen_submission"] == 2 and final["result"]["category"] == "syntax_error"
