"""Replay recorded responses: re-evaluate published generations, and exact tests.

Records are JSON lines with at least `task`, `turn` and `raw_response` (the
format of shared/replay/kernelbench-agentic/*.jsonl); optional `sample`, `cand`
and `role` (defaults 0, 0, "generator"), and optional `finish_reason`,
`prompt_tokens`, `completion_tokens`, `latency_s` that are passed through.
`path` is one .jsonl file, or a folder of `<method>.jsonl` files where the
call's method (or the spec's `method`) picks the file. Records may also carry
the publishing study's verdicts (`study_verdict`, `final`): the backend ignores
them; the report compares them (kernelsweep.report.published, docs/results.md).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from kernelsweep.models.base import Backend, Completion, ModelSetupError
from kernelsweep.models.messages import validate_messages

_RecordKey = tuple[str, int, int, int, str]  # task, sample, turn, cand, role


def _record_key(task: Any, sample: Any, turn: Any, cand: Any, role: Any) -> _RecordKey:
    return (str(task), int(sample), int(turn), int(cand), str(role))


def resolve_path(path: str, repo_root: str | os.PathLike) -> Path:
    """Where a replay `path` points: $VARS and ~ expanded (as tasks.path); a
    relative one is taken from the working directory when it is there, else
    from the repository root, as tasks.path is (so a run in another folder,
    `snakemake -s .../Snakefile`, a SLURM job, finds the shipped recordings).
    Found in neither: the path as written, for the error that names it."""
    p = Path(os.path.expandvars(path)).expanduser()
    if p.is_absolute() or p.exists():
        return p.resolve()
    in_repo = Path(repo_root) / p
    return in_repo.resolve() if in_repo.exists() else p


class ReplayBackend(Backend):
    kind = "replay"

    def __init__(self, name: str, spec: dict[str, Any]):
        super().__init__(name, spec)
        self.root = Path(os.path.expandvars(spec["path"])).expanduser()  # as tasks.path: $VARS and ~
        if not self.root.exists():
            raise ModelSetupError(f"model '{name}': replay path not found: {self.root}")
        self._files: dict[Path, tuple[dict[_RecordKey, dict], str]] = {}

    @property
    def model_id(self) -> str:
        return self.spec.get("model_id") or f"replay:{self.root.name}"

    @property
    def revision(self) -> str | None:
        # The digest of the file(s) read so far: which exact records were replayed.
        digests = sorted(digest for _, digest in self._files.values())
        if not digests:
            return None
        combined = digests[0] if len(digests) == 1 else hashlib.sha256("\n".join(digests).encode()).hexdigest()
        return "sha256:" + combined

    def _file_for(self, key: dict) -> Path:
        if self.root.is_file():
            return self.root
        method = self.spec.get("method") or key.get("method")
        if not method:
            raise ModelSetupError(f"model '{self.name}': {self.root} is a folder; the call key names no method")
        path = self.root / f"{method}.jsonl"
        if not path.is_file():
            found = ", ".join(sorted(p.stem for p in self.root.glob("*.jsonl"))) or "none"
            raise ModelSetupError(f"model '{self.name}': no replay file for method '{method}' "
                                  f"({path} missing; methods found: {found})")
        return path

    def _records(self, path: Path) -> dict[_RecordKey, dict]:
        if path not in self._files:
            data = path.read_bytes()
            records: dict[_RecordKey, dict] = {}
            for lineno, line in enumerate(data.decode("utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    key = _record_key(row["task"], row.get("sample", 0), row["turn"], row.get("cand", 0),
                                      row.get("role", "generator"))
                    if not isinstance(row["raw_response"], str):
                        raise TypeError("raw_response is not a string")
                except (ValueError, KeyError, TypeError) as e:
                    raise ModelSetupError(f"{path}:{lineno}: not a replay record ({type(e).__name__}: {e})") from e
                if key in records:
                    raise ModelSetupError(f"{path}:{lineno}: duplicate record for {key}")
                records[key] = {**row, "_line": lineno}
            self._files[path] = (records, hashlib.sha256(data).hexdigest())
        return self._files[path][0]

    def generate(self, messages: list[dict], *, n: int, temperature: float, top_p: float,
                 max_tokens: int, seed: int, key: dict) -> list[Completion]:
        validate_messages(messages)
        path = self._file_for(key)
        records = self._records(path)
        completions = []
        for i in range(n):
            try:
                wanted = _record_key(key["task"], key.get("sample", 0), key["turn"], i, key.get("role", "generator"))
            except KeyError as e:
                raise ModelSetupError(
                    f"model '{self.name}': the call key lacks {e} (replay needs task and turn)") from e
            row = records.get(wanted)
            if row is None:
                task, sample, turn, cand, role = wanted
                raise ModelSetupError(
                    f"model '{self.name}': no recorded response in {path} for task={task} sample={sample} "
                    f"turn={turn} cand={cand} role={role} ({len(records)} records in the file)")
            completions.append(Completion(
                text=row["raw_response"],
                finish_reason=row.get("finish_reason"),
                prompt_tokens=row.get("prompt_tokens"),
                completion_tokens=row.get("completion_tokens"),
                latency_s=row.get("latency_s"),
                request={"messages": messages},
                seed=None,  # nothing was sampled
                index=i,
                meta={"replay": {"file": str(path), "line": row["_line"]}},
            ))
        return completions
