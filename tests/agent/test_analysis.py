"""The report's react analysis over real recorded trajectories."""

from __future__ import annotations

import pandas as pd

from agent_scripts import GOOD_KERNEL, block, broken
from kernelsweep.report import react as analysis


def test_analysis_counts_guards_tools_and_flags_the_broken_record(scenario):
    # A broken record: the same syntax error evaluated five times, the guard injecting twice.
    scenario.method = "react_inject"
    scenario.script([f"Action: evaluate\n{block(broken(i))}" for i in range(5)])
    scenario.run(repeat_error=2, repeat_error_action="inject", max_steps=5, force_profile=None)
    # A cell that only searched the docs and submitted a broken module once.
    scenario.method = "react"
    scenario.script(["Action: search_docs\nquery: shared memory tiling",
                     f"Action: submit\n{block(broken(1))}"])
    scenario.run(max_steps=2)

    # A success: the working kernel, submitted once.
    scenario.method = "react_good"
    scenario.script([f"Action: submit\n{block(GOOD_KERNEL)}"])
    scenario.run(max_steps=1, goal="correct")

    methods = {"react": {"strategy": "react"}, "react_inject": {"strategy": "react"},
               "react_good": {"strategy": "react"}, "zero_shot": {"strategy": "zero_shot"}}
    section = analysis.build(scenario.root, scenario.root / "report", ["rp"], methods, ["L0-001"], 1)
    cells = pd.read_csv(scenario.root / "report/react/cells.csv").set_index("method")
    assert cells.loc["react_inject", "broken_record_count"] == 5
    assert cells.loc["react_inject", "guard_repeat_error"] == 2
    assert pd.isna(cells.loc["react", "broken_record"])
    assert cells.loc["react", "submissions"] == 1 and cells.loc["react_inject", "submissions"] == 0
    assert cells.loc["react", "used_search_docs"] == 1 and not cells.loc["react", "profiled"]
    by_sub = pd.read_csv(scenario.root / "report/react/success_by_submissions.csv", dtype={"submissions": str})
    assert by_sub.set_index("method").loc["react", "submissions"] == "1"
    firings = pd.read_csv(scenario.root / "report/react/guard_firings.csv")
    assert firings.firings.sum() == 2
    assert "### broken record" in section and "react_inject" in section.split("### broken record")[1]
    page = scenario.root / "report/react/trajectories/fp32/rp/react_inject/L0-001/s0.html"
    assert "guard repeat_error: inject" in page.read_text()
    assert "trajectories/fp32/rp/react/L0-001/s0.html" in (scenario.root / "report/react/index.html").read_text()
    assert (scenario.root / "report/react/figures/react_success_vs_submissions.svg").exists()
    good = by_sub.set_index("method").loc["react_good"]
    assert (good.submissions, good.cells, good.successes, good.success_rate) == ("1", 1, 1, 1.0)
    speed = pd.read_csv(scenario.root / "report/react/speedup_of_successes.csv").set_index("method")
    assert list(speed.index) == ["react_good"] and speed.loc["react_good", "successes"] == 1
    tokens = pd.read_csv(scenario.root / "report/react/tokens_by_outcome.csv")
    assert sorted(zip(tokens.method, tokens.outcome, tokens.cells)) == \
        [("react", "failure", 1), ("react_good", "success", 1), ("react_inject", "failure", 1)]
