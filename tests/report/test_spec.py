"""STUDY.json: validation with messages that name the problem, and which methods
form the component ablation and the best-of-n sweep."""

import json

import pytest
from synthetic import AGENTIC, SMALL_STUDY

from kernelsweep.report.spec import Ablation, ReportInputError, load_study, parse_study


def study(**methods):
    return dict(SMALL_STUDY, methods=methods)


def test_ablations_are_single_flag_flips_of_the_base():
    spec = parse_study(study(
        agentic=AGENTIC,
        no_analyzer=dict(AGENTIC, analyzer=False),
        no_rag=dict(AGENTIC, researcher=False),
        no_feedback=dict(AGENTIC, feedback=False),
        single=dict(AGENTIC, turns=1),
        two_flips=dict(AGENTIC, analyzer=False, researcher=False),
        four_turns=dict(AGENTIC, turns=4),
        zero_shot={"strategy": "zero_shot", "turns": 1, "n": 1, "analyzer": True, "researcher": True,
                   "feedback": True},
    ))
    assert spec.component_ablations() == [
        Ablation("no_analyzer", "without analyzer"), Ablation("no_rag", "without researcher"),
        Ablation("no_feedback", "without feedback"), Ablation("single", "single turn")]
    assert spec.unclassified_variants() == {"two_flips": ["analyzer", "researcher"], "four_turns": ["turns"]}


def test_best_of_n_sweep_includes_the_base_and_only_n_variants():
    spec = parse_study(study(agentic=dict(AGENTIC, n=4), n1=dict(AGENTIC, n=1), n8=dict(AGENTIC, n=8),
                             n2=dict(AGENTIC, n=2), n2_hot=dict(AGENTIC, n=2, temperature=1.0)))
    assert spec.best_of_n_sweep() == [(1, "n1"), (2, "n2"), (4, "agentic"), (8, "n8")]
    assert spec.unclassified_variants() == {"n2_hot": ["n", "temperature"]}


@pytest.mark.parametrize("base, why", [
    (None, "no ablation base is configured"),
    ("absent", "the ablation base 'absent' is not a method of this study"),
    ("zero_shot", "the ablation base 'zero_shot' is not an agentic method"),
])
def test_no_usable_base_means_no_ablation_and_says_why(base, why):
    methods = {"zero_shot": {"strategy": "zero_shot"}, "agentic": AGENTIC, "no_rag": dict(AGENTIC, researcher=False)}
    spec = parse_study(dict(SMALL_STUDY, methods=methods, ablation_base=base))
    assert spec.component_ablations() == [] and spec.best_of_n_sweep() == []
    assert spec.ablation_status() == why


def test_expected_cells_span_the_matrix():
    spec = parse_study(dict(SMALL_STUDY, samples=2))
    cells = spec.expected_cells()
    assert len(cells) == 1 * 4 * 3 * 2
    assert cells[0] == ("m1", "zero_shot", "L1-001", 0) and cells[1] == ("m1", "zero_shot", "L1-001", 1)
    assert spec.compile_modes == ("inductor-default", "inductor-reduce-overhead", "inductor-max-autotune")
    assert spec.levels == [1, 2]


@pytest.mark.parametrize("change, message", [
    ({"models": {}}, "'models' is empty"),
    ({"tasks": [{"id": "L1-001"}]}, "missing key 'level'"),
    ({"tasks": [{"id": "L1-001", "level": "one"}]}, "key 'level' must be a int"),
    ({"samples": 0}, "'samples' must be a positive integer"),
    ({"ablation_base": 3}, "'ablation_base' must be a method name"),
    ({"methods": {"x": {"turns": 1}}}, "method 'x' must be an object with a 'strategy'"),
    ({"tasks": [{"id": "L1-001", "level": 1}, {"id": "L1-001", "level": 1}]}, "listed more than once: L1-001"),
])
def test_invalid_study_says_what_is_wrong(change, message):
    with pytest.raises(ReportInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_study(dict(SMALL_STUDY, **change))


def test_study_file_errors(tmp_path):
    with pytest.raises(ReportInputError, match="study file not found"):
        load_study(tmp_path / "absent.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"device": "cpu",')
    with pytest.raises(ReportInputError, match=r"not valid JSON: .* \(line 1"):
        load_study(bad)
    good = tmp_path / "study.json"
    good.write_text(json.dumps(SMALL_STUDY))
    assert load_study(good).device == "cpu"


def test_the_manifest_of_a_resolved_config_is_the_study_the_report_reads(tmp_path):
    import subprocess
    import sys

    import yaml

    from kernelsweep.study.matrix import REPO_ROOT, validate_config

    config = validate_config(yaml.safe_load((REPO_ROOT / "config" / "paper.yaml").read_text()))
    task = tmp_path / "L2-001.json"
    task.write_text(json.dumps({"id": "L2-001", "level": 2, "name": "1_Conv", "code": "x"}))
    out = tmp_path / "study.json"
    subprocess.run([sys.executable, "-m", "kernelsweep", "manifest", "--config", json.dumps(config),
                    "--tasks", str(task), "--out", str(out)], check=True)
    spec = load_study(out)
    assert (spec.device, spec.samples, spec.ablation_base) == ("cuda", 1, "agentic")
    assert spec.methods == config["methods"] and spec.models == config["models"] and spec.config == config
    assert spec.baseline_modes == tuple(config["baseline"]["modes"]) and spec.equivalence_margin == 0.01
    assert [(t.id, t.level, t.name) for t in spec.tasks] == [("L2-001", 2, "1_Conv")]


def test_recorded_rows_are_labelled_recorded_wherever_a_model_is_named():
    from kernelsweep.report import figures, tables

    spec = parse_study(dict(SMALL_STUDY, models={
        "gemma": {"backend": "transformers", "path": "models/gemma"},
        "recorded-demo": {"backend": "replay", "path": "recorded", "recorded": True}}))
    assert spec.model_label("gemma") == "gemma"
    assert spec.model_label("recorded-demo") == "recorded-demo (recorded)"
    assert tables._row_key(spec, "recorded-demo", "zero_shot") == {"model": "recorded-demo (recorded)",
                                                                    "method": "zero_shot"}
    assert figures._label(spec, "recorded-demo", "zero_shot") == "recorded-demo (recorded)/zero_shot"
