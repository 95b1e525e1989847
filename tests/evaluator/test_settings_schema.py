"""One source of evaluation defaults: the workflow schema's `evaluation`
defaults equal settings.EvalSettings, and every flag of cheats.FLAGS is
documented in docs/taxonomy.md."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path

import yaml

from kernelsweep.evaluator import cheats, settings

ROOT = Path(__file__).resolve().parents[2]


def test_schema_defaults_are_the_settings_defaults():
    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    evaluation = schema["properties"]["evaluation"]["properties"]
    defaults = {f.name: f.default for f in fields(settings.EvalSettings)}
    assert evaluation, "the schema has no evaluation section"
    for key, spec in evaluation.items():
        assert key in defaults, f"schema key evaluation.{key} is not an EvalSettings field"
        assert spec.get("default") == defaults[key], (key, spec.get("default"), defaults[key])


def test_every_flag_is_documented():
    taxonomy = (ROOT / "docs/taxonomy.md").read_text()
    missing = [name for name in cheats.FLAGS if f"`{name}`" not in taxonomy]
    assert not missing, f"flags not in docs/taxonomy.md: {missing}"


def test_unknown_flags_are_refused():
    cheats.check_known(["cheat" and "mutates_inputs"])
    try:
        cheats.check_known(["no_such_flag"])
    except KeyError:
        return
    raise AssertionError("an unknown flag was accepted")


def test_baseline_modes_have_one_definition():
    """The schema's baseline modes are settings.BASELINE_MODES; a claim's baselines are the
    corpus's, each measured by a mode (models.corpus.MEASURED_BY, the one map between them)."""
    from kernelsweep.models import corpus
    from kernelsweep.report import spec

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    modes = schema["properties"]["baseline"]["properties"]["modes"]
    assert tuple(modes["items"]["enum"]) == tuple(modes["default"]) == settings.BASELINE_MODES
    assert spec.DEFAULT_BASELINE_MODES == settings.BASELINE_MODES
    claimed = schema["$defs"]["model_corpus"]["properties"]["baseline"]["enum"]
    assert tuple(claimed) == corpus.BASELINES == tuple(corpus.MEASURED_BY)
    assert set(corpus.MEASURED_BY.values()) <= set(settings.BASELINE_MODES)
    assert set(settings.COMPILE_MODES) | set(settings.UNPAIRED_MODES) <= set(settings.BASELINE_MODES)


def test_schema_baseline_defaults_are_the_baseline_settings_defaults():
    """The workflow's `baseline` section, `kernelsweep baseline` and run_baseline share
    settings.BaselineSettings' defaults (one home)."""
    import argparse
    import inspect

    from kernelsweep.evaluator import baseline
    from kernelsweep.evaluator.cli import Baseline

    schema = yaml.safe_load((ROOT / "workflow/schemas/config.schema.yaml").read_text())
    section = schema["properties"]["baseline"]["properties"]
    defaults = {f.name: f.default for f in fields(settings.BaselineSettings)}
    for key, spec in section.items():
        assert key in defaults, f"schema key baseline.{key} is not a BaselineSettings field"
        default = tuple(spec["default"]) if isinstance(spec["default"], list) else spec["default"]
        assert default == defaults[key], (key, default, defaults[key])
    signature = inspect.signature(baseline.run_baseline).parameters
    for key, value in defaults.items():
        got = signature[key].default
        assert (tuple(got) if key == "modes" else got) == value, key
    parser = argparse.ArgumentParser()
    Baseline.configure(parser)
    args = parser.parse_args(["ref.py"])
    assert (tuple(args.modes), args.timing_trials, args.warmup, args.timeout) == (
        defaults["modes"], defaults["timing_trials"], defaults["warmup"], defaults["timeout_s"])
