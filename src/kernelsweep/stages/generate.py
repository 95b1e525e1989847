"""`kernelsweep generate`: one model call of the study matrix, with everything
needed to reproduce it recorded (docs/results.md, "response").

    kernelsweep generate --model NAME --model-spec JSON --prompt PROMPT.json --out-dir DIR

Role generator writes DIR/c{i}/candidate.py and DIR/c{i}/response.json for
each of the n candidates; other roles write DIR/response.json. A stopped turn
writes "stopped" records without calling the model; a call the server refused
(a 4xx, say the prompt exceeds the context) writes "failed" records and exits
0: that is the model's outcome. A call that
never got an answer (an outage: exit 3), a full disk (exit 4), a bad argument or
an unreadable prompt (exit 2) or a model that cannot be used as configured
(exit 1) writes nothing and exits non-zero with a message, so the job fails and
the next run redoes it.
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kernelsweep.prompting.extract import extract_code
from kernelsweep.study import layout
from kernelsweep.core.fileio import dumps, write_atomic, write_json
from kernelsweep.models import GenerationFailed, InfrastructureFailure, ModelSetupError, load_backend
from kernelsweep.models.messages import validate_messages
from kernelsweep.models.records import RESPONSE_SCHEMA
from kernelsweep.models.server import raise_on_sigterm
from kernelsweep.models.spec import normalise
from kernelsweep.core.seeds import derive_seed
from kernelsweep.study.matrix import ROLES
KEY_FIELDS = ("model", "method", "task", "sample", "turn")


class UsageError(Exception):
    """Bad arguments or an unreadable prompt: exit 2 with the message."""


def configure(parser) -> None:
    parser.add_argument("--model", required=True, help="model name (the key of config: models)")
    parser.add_argument("--model-spec", required=True, help="the model entry as JSON text, or a path to a JSON file")
    parser.add_argument("--prompt", required=True, help="prompt.json written by `kernelsweep prompt`")
    parser.add_argument("--out-dir", required=True, help="the turn folder (generator) or the role folder")


def _load_spec(text: str) -> dict:
    source = text
    if not text.lstrip().startswith("{"):
        try:
            source = Path(text).read_text()
        except OSError as e:
            raise UsageError(f"--model-spec is neither JSON nor a readable file: {e}") from e
    try:
        spec = json.loads(source)
    except ValueError as e:
        raise UsageError(f"--model-spec is not valid JSON: {e}") from e
    if not isinstance(spec, dict):
        raise UsageError("--model-spec must be a JSON object")
    return spec


def _int(value: Any, what: str) -> int:
    try:
        if isinstance(value, bool) or float(value) != int(value):
            raise ValueError
        return int(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be an integer, got {value!r}") from None


def read_prompt(path: str, model: str) -> dict:
    """prompt.json, validated: messages, role, key (ints for sample/turn), stopped."""
    try:
        prompt = json.loads(Path(path).read_text())
    except OSError as e:
        raise UsageError(f"cannot read the prompt {path}: {e}") from e
    except ValueError as e:
        raise UsageError(f"the prompt {path} is not valid JSON: {e}") from e
    if not isinstance(prompt, dict):
        raise UsageError(f"the prompt {path} must be a JSON object")
    role = prompt.get("role")
    if role not in ROLES:
        raise UsageError(f"{path}: role must be one of {', '.join(ROLES)}, got {role!r}")
    key = prompt.get("key")
    if not isinstance(key, dict) or any(k not in key for k in KEY_FIELDS):
        raise UsageError(f"{path}: key must hold {', '.join(KEY_FIELDS)}, got {key!r}")
    key = {**key, "sample": _int(key["sample"], "key.sample"), "turn": _int(key["turn"], "key.turn"), "role": role}
    if str(key["model"]) != model:
        raise UsageError(f"{path} is a prompt for model '{key['model']}', not '{model}'")
    stopped = prompt.get("stopped", False)
    if not isinstance(stopped, bool):
        raise UsageError(f"{path}: stopped must be true or false, got {stopped!r}")
    messages = prompt.get("messages")
    if not (stopped and not messages):
        try:
            validate_messages(messages)
        except ValueError as e:
            raise UsageError(f"{path}: {e}") from e
    params = prompt.get("params") or {}
    if not isinstance(params, dict):
        raise UsageError(f"{path}: params must be an object")
    return {**prompt, "key": key, "messages": messages or [], "params": params, "stopped": stopped}


def resolve_params(params: dict, spec: dict, role: str) -> dict:
    """Sampling parameters: the prompt's (a method's choice) over the model's defaults."""
    out = {
        "n": _int(params.get("n", 1), "params.n"),
        "temperature": params.get("temperature", spec["temperature"]),
        "top_p": params.get("top_p", spec["top_p"]),
        "max_tokens": _int(params.get("max_tokens", spec["max_tokens"]), "params.max_tokens"),
    }
    if out["temperature"] is None:
        out["temperature"] = spec["temperature"]
    if out["n"] < 1 or out["max_tokens"] < 1:
        raise UsageError(f"params.n and params.max_tokens must be >= 1, got {out}")
    if role != "generator" and out["n"] != 1:
        raise UsageError(f"role {role} takes one response, got n={out['n']}")
    for name, low, high in (("temperature", 0.0, None), ("top_p", 0.0, 1.0)):
        value = out[name]
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < low \
                or (high is not None and value > high) or (name == "top_p" and value == 0):
            raise UsageError(f"params.{name} out of range: {value!r}")
    return out


def _record(*, status: str, prompt: dict, params: dict, model: dict, seed: int | None, cand: int | None,
            completion=None, error: Exception | None = None) -> dict[str, Any]:
    role = prompt["role"]
    request = dict(completion.request) if completion else {"messages": prompt["messages"]}
    used_seed = completion.seed if completion else None
    # The seed sent for this candidate: its own request's, else the call's
    # (a replayed response samples nothing: `seed` stays null).
    request["params"] = {"temperature": params["temperature"], "top_p": params["top_p"],
                         "max_tokens": params["max_tokens"], "n": params["n"],
                         "seed": used_seed if used_seed is not None else seed}
    extraction = None
    if completion is not None and role == "generator":
        extraction = extract_code(completion.text).to_dict()
    return {
        "schema": RESPONSE_SCHEMA,
        "status": status,
        "error": None if error is None else {"type": type(error).__name__, "message": str(error)},
        "role": role,
        "key": prompt["key"],
        "cand": cand,
        "model": model,
        "request": request,
        "raw_text": completion.text if completion else None,
        "finish_reason": completion.finish_reason if completion else None,
        "usage": {"prompt_tokens": completion.prompt_tokens if completion else None,
                  "completion_tokens": completion.completion_tokens if completion else None},
        "latency_s": completion.latency_s if completion else None,
        "seed": used_seed if completion else seed,
        "batch": {"n": params["n"], "index": completion.index if completion else cand},
        "extraction": extraction,
        "meta": completion.meta if completion else {},
        "prompt_sha256": prompt.get("sha256"),
        "finished_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


def _write(out_dir: Path, role: str, records: list[dict]) -> None:
    # One model call (n samples, batched or as concurrent requests) is one call
    # however many candidates it yields: its records share a call_id.
    if records and records[0]["status"] != "stopped":
        call_id = uuid.uuid4().hex
        for record in records:
            record["call_id"] = call_id
    if role != "generator":
        write_json(out_dir / layout.RESPONSE, records[0])
        return
    written: list[Path] = []
    try:
        for i, record in enumerate(records):
            folder = out_dir / layout.CAND_DIR.format(cand=i)
            code = (record.get("extraction") or {}).get("code") or ""
            for path, text in ((folder / layout.CANDIDATE, code), (folder / layout.RESPONSE, dumps(record))):
                write_atomic(path, text)  # response.json last: its presence means the candidate is complete
                written.append(path)
    except BaseException:
        # A write refused half-way (a full disk): the call leaves all its files or none.
        for path in written:
            path.unlink(missing_ok=True)
        raise


def run(model_name: str, spec: dict, prompt: dict, out_dir: Path) -> str:
    """Make the call and write its records; the status written."""
    spec = normalise(model_name, spec)
    params = resolve_params(prompt["params"], spec, prompt["role"])
    key = prompt["key"]
    seed = derive_seed(key["model"], key["method"], key["task"], key["sample"], key["turn"], 0, prompt["role"])
    n = params["n"]

    if prompt["stopped"]:
        model = {"name": model_name, "backend": spec["backend"],
                 "model_id": spec.get("model_id") or spec.get("model") or spec.get("path"), "revision": None}
        _write(out_dir, prompt["role"], [_record(status="stopped", prompt=prompt, params=params, model=model,
                                                 seed=None, cand=i) for i in range(n)])
        return "stopped"

    with load_backend(model_name, spec) as backend:
        try:
            completions = backend.generate(prompt["messages"], n=n, temperature=params["temperature"],
                                           top_p=params["top_p"], max_tokens=params["max_tokens"], seed=seed,
                                           key=key)
        except GenerationFailed as e:
            records = [_record(status="failed", prompt=prompt, params=params, model=backend.describe(), seed=seed,
                               cand=i, error=e) for i in range(n)]
            _write(out_dir, prompt["role"], records)
            print(f"generate: the server refused the call, recorded as failed: {e}", file=sys.stderr)
            return "failed"
        model = backend.describe()
    if len(completions) != n:
        raise ModelSetupError(f"model '{model_name}' returned {len(completions)} completions for n={n}")
    records = [_record(status="ok", prompt=prompt, params=params, model=model, seed=seed, cand=i, completion=c)
               for i, c in enumerate(completions)]
    _write(out_dir, prompt["role"], records)
    return "ok"


def main(args) -> int:
    raise_on_sigterm()  # a server this call starts must not outlive a killed job
    try:
        spec = _load_spec(args.model_spec)
        prompt = read_prompt(args.prompt, args.model)
        status = run(args.model, spec, prompt, Path(args.out_dir))
    except UsageError as e:
        print(f"kernelsweep generate: {e}", file=sys.stderr)
        return 2
    except ModelSetupError as e:
        print(f"kernelsweep generate: {e}", file=sys.stderr)
        return 1
    except InfrastructureFailure as e:
        print(f"kernelsweep generate: outage, not a result: {e}", file=sys.stderr)
        return 3
    # A full disk (exit 4) is named by kernelsweep.commands.cli, for every subcommand.
    key = prompt["key"]
    where = f"{layout.CELL_KEY}/{layout.TURN_DIR}".format(**{"precision": "?", **key})  # "?": a key from before precision
    print(f"{args.out_dir}: {prompt['role']} {where} -> {status}")
    return 0
