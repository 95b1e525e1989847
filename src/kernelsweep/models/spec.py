"""Model entries of the config. The keys, their types, ranges and per-backend
defaults are `$defs/model` of workflow/schemas/config.schema.yaml (config/README.md
lists them); this module checks an entry against it, fills the backend's defaults
and adds the rules that span keys."""

from __future__ import annotations

from typing import Any

from kernelsweep.models.base import ModelSetupError
from kernelsweep.core.schema import load_schema

BACKENDS = ("openai", "transformers", "replay", "corpus")


def _fail(name: str, message: str) -> ModelSetupError:
    return ModelSetupError(f"model '{name}': {message}")


def backend_schema(backend: str) -> dict[str, dict[str, Any]]:
    """key -> its schema, for every key of a backend's entry (the shared ones included)."""
    return load_schema()["$defs"][f"model_{backend}"]["properties"]


def defaults(backend: str) -> dict[str, Any]:
    """A backend's defaults; `server` (openai) as the mapping of its own defaults."""
    out = {k: s["default"] for k, s in backend_schema(backend).items() if "default" in s}
    if backend == "openai":
        out["server"] = {k: s["default"] for k, s in backend_schema("openai")["server"]["properties"].items()}
    return out


def _explain(error) -> str:
    """One schema error as `key must …, got …`."""
    key = ".".join(str(p) for p in error.absolute_path)
    schema, value = error.schema, error.instance
    if error.validator == "additionalProperties":
        allowed = schema["properties"]
        where = f" {key}" if key else ""
        return (f"unknown{where} key(s) {', '.join(sorted(set(value) - set(allowed)))} "
                f"(allowed: {', '.join(sorted(allowed))})")
    if error.validator == "required":
        return error.message
    if error.validator == "type":
        kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        words = {"boolean": "true or false", "integer": "an integer", "number": "a number", "string": "a string",
                 "object": "a mapping", "null": "null"}
        return f"{key} must be {' or '.join(words[k] for k in kinds)}, got {value!r}"
    if error.validator == "enum":
        return f"{key} must be one of {', '.join(map(repr, schema['enum']))}, got {value!r}"
    bounds = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<=", "exclusiveMaximum": "<"}
    if error.validator in bounds:
        return f"{key} must be {bounds[error.validator]} {error.validator_value}, got {value!r}"
    return f"{key} {schema.get('description') or error.message}, got {value!r}"


def normalise(name: str, spec: Any) -> dict[str, Any]:
    """The entry with its backend's defaults filled in; a clear ModelSetupError for anything wrong."""
    import jsonschema

    if not isinstance(spec, dict):
        raise _fail(name, f"the entry must be a mapping, got {type(spec).__name__}")
    if spec.get("backend") not in BACKENDS:
        raise _fail(name, f"backend must be one of {', '.join(BACKENDS)}, got {spec.get('backend')!r}")
    root = load_schema()
    validator = jsonschema.Draft202012Validator({"$ref": "#/$defs/model", "$defs": root["$defs"]})
    errors = sorted(validator.iter_errors(spec), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        raise _fail(name, "; ".join(dict.fromkeys(_explain(e) for e in errors)))
    out = {**defaults(spec["backend"]), **spec}
    if out["backend"] == "openai":
        out["server"] = {**defaults("openai")["server"], **(spec.get("server") or {})}
        check_openai(name, out)
    return out


def check_openai(name: str, spec: dict[str, Any]) -> None:
    """The openai rules that span keys: a started server needs its checkpoint, otherwise
    the entry names the server to call."""
    server = spec.get("server") or {}
    if server.get("start"):
        if not server.get("checkpoint"):
            raise _fail(name, "server.start needs server.checkpoint (the checkpoint to serve)")
        return
    for key in ("base_url", "model"):
        if not spec.get(key):
            raise _fail(name, f"{key} is required (or set server: {{start: true, checkpoint: …}})")

