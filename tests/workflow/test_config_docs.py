"""The model entry and the tasks: keys are described once, in the schema: the
tables of config/README.md are generated from it, the tasks package reads the
same keys, and the backends get its defaults and its limits."""

import re

import pytest
import yaml

from kernelsweep.commands import config_docs
from kernelsweep.models import ModelSetupError
from kernelsweep.models.spec import BACKENDS, backend_schema, normalise
from kernelsweep.study.matrix import REPO_ROOT, ConfigError, load_schema, validate_config
from kernelsweep.tasks import selection

README = (REPO_ROOT / "config" / "README.md").read_text(encoding="utf-8")


def test_readme_tables_are_the_generated_ones():
    assert config_docs.tasks_table() in README, "regenerate with: python -m kernelsweep.commands.config_docs"
    assert config_docs.model_tables() in README, "regenerate with: python -m kernelsweep.commands.config_docs"


def test_the_tasks_package_reads_the_schema_keys():
    keys = set(load_schema()["properties"]["tasks"]["properties"])
    assert selection.KEYS == keys
    documented = set(re.findall(r"^\s+(\w+):", selection.__doc__, re.M))
    assert documented == keys | {"tasks"}


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_minimal_entry_gets_every_schema_default(backend):
    entry = {"backend": backend, "path": "p"} if backend != "openai" else \
        {"backend": backend, "base_url": "http://127.0.0.1:8000/v1", "model": "m"}
    if backend == "corpus":
        entry["format"] = "jsonl"  # required: no default
    out = normalise("m", entry)
    schema = backend_schema(backend)
    assert set(out) == set(schema)
    for key, sub in schema.items():
        if key not in entry and key != "server":
            assert out[key] == sub["default"], key
    if backend == "openai":
        assert out["server"] == {k: v["default"] for k, v in schema["server"]["properties"].items()}


def test_keys_of_another_backend_are_refused():
    with pytest.raises(ModelSetupError, match=r"unknown key\(s\) base_url"):
        normalise("m", {"backend": "transformers", "path": "p", "base_url": "http://x"})


def test_rules_across_keys_stop_the_plan():
    config = yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())
    config["models"]["q"] = {"backend": "openai", "model": "m"}
    with pytest.raises(ConfigError, match=r"models\.q'.*base_url is required"):
        validate_config(config)
    config["models"]["q"] = {"backend": "openai", "server": {"start": True}}
    with pytest.raises(ConfigError, match="needs server.checkpoint"):
        validate_config(config)
