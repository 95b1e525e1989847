"""The key tables of config/README.md, generated from workflow/schemas/config.schema.yaml
so the two cannot drift (tests/workflow/test_config_docs.py compares them). Print
them with `python -m kernelsweep.commands.config_docs`."""

from __future__ import annotations

from typing import Any

from kernelsweep.models.spec import BACKENDS, backend_schema
from kernelsweep.core.schema import load_schema


def _value(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return f"`{'null' if value is None else str(value).lower()}`"
    return f"`{value:g}`" if isinstance(value, float) else f"`{value}`"


def _meaning(schema: dict[str, Any]) -> str:
    text = " ".join(schema.get("description", "").split())
    if "enum" in schema and "`" not in text:
        text += f"{'; ' if text else ''}one of {', '.join(_value(v) for v in schema['enum'])}"
    return text.replace("|", "\\|")


def _table(rows: list[tuple[str, dict[str, Any]]], required: set[str] = frozenset()) -> str:
    lines = ["| key | default | meaning |", "| --- | --- | --- |"]
    for key, schema in rows:
        default = _value(schema["default"]) if "default" in schema else "required" if key in required else "–"
        lines.append(f"| `{key}` | {default} | {_meaning(schema)} |")
    return "\n".join(lines) + "\n"


def model_tables() -> str:
    """One table per backend (the keys every backend has first); `server` with its own keys."""
    defs = load_schema()["$defs"]
    common = defs["model_common"]["properties"]
    sections = [("every backend", {**common, "backend": defs["model"]["properties"]["backend"]}, {"backend"})]
    sections += [(f"`backend: {b}`", {k: v for k, v in backend_schema(b).items() if k not in common},
                  set(defs[f"model_{b}"].get("required", []))) for b in BACKENDS]
    out = []
    for title, keys, required in sections:
        rows = []
        for key, schema in keys.items():
            rows.append((key, schema))
            rows += [(f"{key}.{k}", v) for k, v in schema.get("properties", {}).items()]
        out.append(f"{title}:\n\n{_table(rows, required)}")
    return "\n".join(out)


def tasks_table() -> str:
    tasks = load_schema()["properties"]["tasks"]
    return _table(list(tasks["properties"].items()), set(tasks["required"]))


if __name__ == "__main__":
    print(f"## tasks\n\n{tasks_table()}\n## models\n\n{model_tables()}")
