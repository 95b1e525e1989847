"""The comparisons with each baseline mode: through the eager timed beside the mode
when the record has it, the best torch.compile mode by its ratio to that eager, and
the baselines tables (each mode's ratio with its interval; candidates per mode)."""

from __future__ import annotations

import json

import pytest
from synthetic import constant, wobbly

from kernelsweep.report import baseline_tables
from kernelsweep.report.baselines import Baseline, Comparator
from kernelsweep.report.collect import collect


def _row(baseline, modes=("inductor-default",), ref=constant(2.0), cand=constant(1.0)):
    comparator = Comparator(modes, modes, 0.01)
    row = {}
    comparator.fill(row, {"correct": True, "category": "correct_faster", "runtime_ms": {"samples": cand},
                          "ref_runtime_ms": {"samples": ref}}, baseline)
    comparator.resolve()
    return row


def test_a_mode_timed_beside_eager_is_compared_through_that_eager():
    # The eager mode's own worker ran on a slower clock (2.4 ms); beside the compile mode eager took 2.0 ms.
    drifted = {"eager": constant(2.4), "inductor-default": constant(1.0)}
    paired = _row(Baseline("L1-001", samples=drifted, paired={"inductor-default": constant(2.0)}))
    assert paired["speedup_inductor_default"] == pytest.approx(1.0) and paired["verdict_inductor_default"] == "tie"
    # A record from before pairing goes through the eager mode's worker, and carries its drift.
    apart = _row(Baseline("L1-001", samples=drifted))
    assert apart["speedup_inductor_default"] == pytest.approx(2.0 / 2.4)
    assert apart["verdict_inductor_default"] == "slower"
    # Without the eager mode, the paired eager alone still anchors the comparison.
    alone = _row(Baseline("L1-001", samples={"inductor-default": constant(1.0)},
                          paired={"inductor-default": constant(2.0)}))
    assert alone["speedup_compile"] == pytest.approx(1.0)


def test_the_best_compile_mode_is_the_largest_ratio_to_its_own_eager():
    # max-autotune has the shortest absolute time, but its worker ran on a faster clock:
    # beside it eager took 1.2 ms (ratio 1.5), while default is 2x its eager.
    baseline = Baseline("L2-001", samples={"eager": constant(3.0), "inductor-default": constant(1.0),
                                           "inductor-max-autotune": constant(0.8)},
                        paired={"inductor-default": constant(2.0), "inductor-max-autotune": constant(1.2)})
    modes = ("inductor-default", "inductor-max-autotune")
    assert baseline.best_compile_mode(modes) == "inductor-default"
    assert _row(baseline, modes)["best_compile_mode"] == "inductor-default"
    assert baseline.ratio("inductor-max-autotune")["speedup"] == pytest.approx(1.5)


def test_the_baselines_tables_give_each_mode_its_interval(small_study):
    results, _, spec = small_study
    path = results / "baseline" / spec.device / "fp32" / "L2-001.json"
    record = json.loads(path.read_text())
    for mode, eager in (("inductor-default", wobbly(2.0)), ("inductor-reduce-overhead", wobbly(3.0))):
        record["modes"][mode]["paired_eager_ms"] = {"samples": eager}
    path.write_text(json.dumps(record))
    c = collect(results, spec)
    modes_table, compared = baseline_tables.tables(c)
    rows = {(r["task"], r["mode"]): r for r in modes_table.data.to_dict("records")}
    assert len(rows) == 3 * 3  # every task, every mode but eager
    l1 = rows["L1-001", "inductor-default"]  # an unpaired record: through the eager mode, 2.0 / 1.5
    assert l1["speedup"] == pytest.approx(2.0 / 1.5) and l1["paired"] is False and l1["verdict"] == "faster"
    assert l1["speedup_lo"] == pytest.approx(2.0 / 1.5) == pytest.approx(l1["speedup_hi"])  # constant samples
    assert rows["L1-001", "inductor-max-autotune"]["unusable"] == "failed: autotune failed"
    assert rows["L1-002", "inductor-default"]["unusable"] == "no baseline record"
    l2 = rows["L2-001", "inductor-reduce-overhead"]  # beside its ±10% eager, 3.0 ms: a tie, not a flip
    assert l2["paired"] is True and l2["speedup"] == pytest.approx(1.0)
    assert l2["speedup_lo"] < 1.0 < l2["speedup_hi"] and l2["verdict"] == "tie"
    view = modes_table.parts[0].frame
    assert view.loc[(view["task"] == "L2-001") & (view["mode"] == "inductor-default"),
                    "timed beside eager"].item() == "yes"
    by = {(r["method"], r["mode"]): r for r in compared.data.to_dict("records")}
    # agentic: L1-001 2.0x eager, against default (unpaired, 2.0 / 1.5) 1.5x: faster; L1-002 has no
    # baseline; L2-001 0.5x eager, against default (beside it eager 2.0 / default 1.0) 0.25x: slower
    agentic = by["agentic", "inductor-default"]
    assert (agentic["cells"], agentic["faster"], agentic["tie"], agentic["slower"]) == (2, 1, 0, 1), agentic
    cell = c.cells[(c.cells["method"] == "agentic") & (c.cells["task"] == "L2-001")].iloc[0]
    assert cell["speedup_inductor_default"] == pytest.approx(0.5 / 2.0)
    assert agentic["geomean"] == pytest.approx((1.5 * 0.25) ** 0.5)
