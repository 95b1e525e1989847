"""Config validation: every mistake names its key and the allowed values,
and the method presets resolve to the flags the strategies read."""

import copy

import pytest
import yaml

from kernelsweep.study.matrix import REPO_ROOT, ConfigError, load_study, validate_config


def demo_config():
    with open(REPO_ROOT / "config" / "config.yaml") as f:
        return yaml.safe_load(f)


def paper_config():
    with open(REPO_ROOT / "config" / "paper.yaml") as f:
        return yaml.safe_load(f)


def test_both_shipped_configs_validate():
    for config in (demo_config(), paper_config()):
        resolved = validate_config(config)
        assert resolved["evaluation"]["timeout_s"] > 0


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda c: c.update(device="gpu"), ["config key 'device'", "'gpu'", "'cpu', 'cuda'"]),
        (lambda c: c.pop("models"), ["'models' is a required property"]),
        (lambda c: c["methods"]["zero_shot"].update(turnz=2), ["config key 'methods.zero_shot'", "'turnz'", "allowed keys", "turns"]),
        (lambda c: c["methods"].update(bad={"strategy": "genetic"}), ["config key 'methods.bad.strategy'", "'genetic'", "'agentic'"]),
        (lambda c: c["tasks"].update(source="s3"), ["config key 'tasks.source'", "'demo', 'hub', 'local'"]),
        (lambda c: c["evaluation"].update(trials=0), ["config key 'evaluation.trials'", "minimum"]),
        (lambda c: c["models"]["gemma270m"].pop("path"), ["config key 'models.gemma270m'", "'path' is a required property"]),
        (lambda c: c["tasks"].update(ids="one-to-ten"), ["config key 'tasks.ids'"]),
        (lambda c: c.update(precision="fp64"), ["config key 'precision'", "'fp32', 'fp16', 'bf16'"]),
        (lambda c: c.update(precision=["fp32", "fp8"]), ["config key 'precision.1'", "'fp8'", "'fp32', 'fp16', 'bf16'"]),
        (lambda c: c.update(precision=[]), ["config key 'precision'"]),
        (lambda c: c.update(precision=["bf16", "bf16"]), ["config key 'precision'", "non-unique"]),
        (lambda c: c["models"].update(fp16={"backend": "replay", "path": "x"}), ["config key 'models.fp16'"]),
        (lambda c: c["evaluation"].update(equivalence_margin=1.5), ["config key 'evaluation.equivalence_margin'"]),
        (lambda c: c.update(timing_devices=[1]), ["config key 'timing_devices'", "device is 'cpu'"]),
        (lambda c: c.update(device="cuda", timing_devices=["0; rm"]), ["config key 'timing_devices"]),
        (lambda c: c.update(device="cuda", timing_devices=[1, 1]), ["config key 'timing_devices'", "non-unique"]),
    ],
)
def test_invalid_keys_are_named(mutate, expected):
    config = demo_config()
    mutate(config)
    with pytest.raises(ConfigError) as info:
        validate_config(config)
    message = str(info.value)
    for fragment in expected:
        assert fragment in message, message


def test_all_errors_reported_at_once():
    config = demo_config()
    config["device"] = "tpu"
    config["precision"] = "int8"
    message = str(pytest.raises(ConfigError, validate_config, config).value)
    assert "'device'" in message and "'precision'" in message


def test_method_presets_and_overrides():
    config = paper_config()
    methods = validate_config(config)["methods"]
    assert methods["zero_shot"] | {} == methods["zero_shot"]
    assert (methods["zero_shot"]["turns"], methods["zero_shot"]["n"], methods["zero_shot"]["profile"]) == (1, 1, False)
    assert methods["guided"]["profile"] and methods["guided"]["competence_rule"]
    assert methods["iterative"]["turns"] == 3 and not methods["iterative"]["analyzer"]
    full = methods["agentic"]
    assert full["analyzer"] and full["researcher"] and full["feedback"] and full["n"] == 4
    # each ablation differs from the full system in exactly one flag
    for name, flag in [("agentic_no_researcher", "researcher"), ("agentic_no_analyzer", "analyzer"),
                       ("agentic_no_feedback", "feedback"), ("agentic_single_turn", "turns"),
                       ("agentic_n1", "n"), ("agentic_n2", "n"), ("agentic_n8", "n")]:
        diff = {k for k in full if methods[name][k] != full[k]}
        assert diff == {flag}, (name, diff)


def test_agentic_role_flags_resolve_false_outside_the_agentic_strategy():
    config = demo_config()
    config["methods"] = {"it": {"strategy": "iterative", "feedback": True, "analyzer": True},
                         "ag": {"strategy": "agentic", "researcher": False}}
    methods = validate_config(config)["methods"]
    assert not (methods["it"]["feedback"] or methods["it"]["analyzer"] or methods["it"]["researcher"])
    assert methods["ag"]["analyzer"] and methods["ag"]["feedback"] and not methods["ag"]["researcher"]


def test_defaults_filled_without_mutating_input():
    config = demo_config()
    before = copy.deepcopy(config)
    resolved = validate_config(config)
    assert config == before
    assert resolved["report"]["ablation_base"] == "agentic"
    assert resolved["baseline"]["timeout_s"] == 1800


def test_study_matrix_of_demo():
    study = load_study(demo_config())
    assert study.device == "cpu"
    # two of the four demo tasks (the 15-minute budget), every strategy, the model's cap holding a kernel
    assert study.task_ids == ("L0-001", "L0-003")
    assert {m["strategy"] for m in study.methods.values()} == {"zero_shot", "guided", "iterative", "agentic", "react"}
    assert study.config["models"]["gemma270m"]["max_tokens"] >= 540  # the longest recorded reply of these tasks
    assert len(study.cells()) == len(study.models) * len(study.methods) * len(study.task_ids) * study.samples


def test_precision_is_an_axis_and_a_single_name_a_list_of_one():
    assert load_study(demo_config()).precisions == ["fp32"]
    study = load_study({**demo_config(), "precision": ["fp32", "bf16"]})
    assert study.precisions == ["fp32", "bf16"] and study.config["precision"] == ["fp32", "bf16"]
    cells = study.cells()
    assert len(cells) == 2 * len(study.models) * len(study.methods) * len(study.task_ids) * study.samples
    assert {c["precision"] for c in cells} == {"fp32", "bf16"}


def test_paper_study_plans_thirty_tasks_offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    study = load_study(paper_config())
    assert len(study.task_ids) == 30
    assert study.task_ids[0] == "L1-001" and study.task_ids[-1] == "L3-010"
    assert len(study.methods) == 23  # 11 of the four strategies, react and its 11 ablations
    assert sum(m["strategy"] == "react" for m in study.methods.values()) == 12


def test_react_guard_needing_a_disabled_tool_is_refused():
    config = paper_config()
    config["methods"] = {"bad": {"strategy": "react", "profiler": False}}
    with pytest.raises(ConfigError, match=r"methods\.bad\.force_profile.*profiler"):
        validate_config(config)
    config["methods"] = {"ok": {"strategy": "react", "profiler": False, "force_profile": None,
                                "repeat_error": 3, "repeat_error_action": "inject"}}
    assert validate_config(config)["methods"]["ok"]["max_submissions"] == 4
