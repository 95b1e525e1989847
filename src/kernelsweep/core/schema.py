"""The config schema, workflow/schemas/config.schema.yaml: read once per process
and shared by the study (kernelsweep.study.matrix) and the model entries
(kernelsweep.models.spec), which both sit above this module. Callers read it and
never change it (defaults are copied out of it)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_PATH = REPO_ROOT / "workflow" / "schemas" / "config.schema.yaml"


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
