"""Model entries of the config: defaults and validation (the keys are
documented in kernelsweep/models/__init__.py)."""

from __future__ import annotations

from typing import Any

from kernelsweep.models.base import ModelSetupError

BACKENDS = ("openai", "transformers", "replay")
DTYPES = ("float32", "float16", "bfloat16", "auto")

# Defaults every backend shares; a method may override temperature (and n).
COMMON = {"max_tokens": 4096, "temperature": 0.0, "top_p": 1.0, "model_id": None, "description": None}

DEFAULTS: dict[str, dict[str, Any]] = {
    "transformers": {
        "path": None, "gguf_file": None, "revision": None, "device": "cpu", "dtype": "float32",
        "chat": "auto", "prepare": None, "threads": None,
    },
    "openai": {
        "base_url": None, "model": None, "api_key_env": None, "chat": True, "n_per_request": True,
        "concurrency": None, "revision": None, "timeout_s": 600.0, "max_retries": 4, "backoff_s": 1.0, "server": None,
    },
    "replay": {"path": None, "method": None},
}

SERVER_DEFAULTS = {
    "start": False, "checkpoint": None, "port": None, "startup_timeout_s": 300.0,
    "device": "cpu", "dtype": "auto", "log": None, "threads": None,
}


def _fail(name: str, message: str) -> ModelSetupError:
    return ModelSetupError(f"model '{name}': {message}")


def _check_number(name: str, spec: dict, key: str, *, minimum: float, integer: bool = False,
                  maximum: float | None = None, exclusive_min: bool = False) -> None:
    value = spec[key]
    kinds = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise _fail(name, f"{key} must be {'an integer' if integer else 'a number'}, got {value!r}")
    if value < minimum or (exclusive_min and value == minimum) or (maximum is not None and value > maximum):
        bound = f"{'>' if exclusive_min else '>='} {minimum}" + (f" and <= {maximum}" if maximum is not None else "")
        raise _fail(name, f"{key} must be {bound}, got {value!r}")


def normalise(name: str, spec: Any) -> dict[str, Any]:
    """The spec with defaults filled in; a clear ModelSetupError for anything wrong."""
    if not isinstance(spec, dict):
        raise _fail(name, f"the entry must be a mapping, got {type(spec).__name__}")
    backend = spec.get("backend")
    if backend not in BACKENDS:
        raise _fail(name, f"backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    allowed = {"backend", *COMMON, *DEFAULTS[backend]}
    unknown = sorted(set(spec) - allowed)
    if unknown:
        raise _fail(name, f"unknown key(s) {', '.join(unknown)} for backend {backend} "
                          f"(allowed: {', '.join(sorted(allowed))})")
    out = {"backend": backend, **COMMON, **DEFAULTS[backend], **spec}

    _check_number(name, out, "max_tokens", minimum=1, integer=True)
    _check_number(name, out, "temperature", minimum=0)
    _check_number(name, out, "top_p", minimum=0, maximum=1, exclusive_min=True)

    if backend == "transformers":
        if not out["path"]:
            raise _fail(name, "path is required (a checkpoint folder, a hub id or a .gguf file)")
        if out["dtype"] not in DTYPES:
            raise _fail(name, f"dtype must be one of {', '.join(DTYPES)}, got {out['dtype']!r}")
        if out["chat"] not in (True, False, "auto"):
            raise _fail(name, f"chat must be true, false or auto, got {out['chat']!r}")
        if out["threads"] is not None:
            _check_number(name, out, "threads", minimum=1, integer=True)
        if out["prepare"] not in (None, "embedded"):
            raise _fail(name, f"prepare must be 'embedded' or absent, got {out['prepare']!r}")
    elif backend == "openai":
        server = spec.get("server") or {}
        if not isinstance(server, dict):
            raise _fail(name, f"server must be a mapping, got {server!r}")
        unknown = sorted(set(server) - set(SERVER_DEFAULTS))
        if unknown:
            raise _fail(name, f"unknown server key(s) {', '.join(unknown)} (allowed: {', '.join(SERVER_DEFAULTS)})")
        server = {**SERVER_DEFAULTS, **server}
        out["server"] = server
        if server["threads"] is not None:
            _check_number(name, server, "threads", minimum=1, integer=True)
        if server["start"]:
            if not server["checkpoint"]:
                raise _fail(name, "server.start needs server.checkpoint (the checkpoint to serve)")
        else:
            for key in ("base_url", "model"):
                if not out[key]:
                    raise _fail(name, f"{key} is required (or set server: {{start: true, checkpoint: …}})")
        if out["base_url"] and not str(out["base_url"]).startswith(("http://", "https://")):
            raise _fail(name, f"base_url must start with http:// or https://, got {out['base_url']!r}")
        if out["chat"] not in (True, False):
            raise _fail(name, f"chat must be true or false for an openai backend, got {out['chat']!r}")
        _check_number(name, out, "timeout_s", minimum=0, exclusive_min=True)
        _check_number(name, out, "max_retries", minimum=0, integer=True)
        _check_number(name, out, "backoff_s", minimum=0)
        if out["concurrency"] is not None:
            _check_number(name, out, "concurrency", minimum=1, integer=True)
    elif backend == "replay":
        if not out["path"]:
            raise _fail(name, "path is required (a .jsonl file or a folder of <method>.jsonl files)")
    return out
