"""Where a checkpoint lives and which exact weights it holds.

A spec's `path` is a local checkpoint folder, a local `.gguf` file, or a Hugging
Face hub id. Checkpoints prepared by kernelsweep carry a marker file, written
last, that records the digest of every file: its `revision` identifies the
weights in every response record.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from kernelsweep.models.base import ModelSetupError

MARKER = ".kernelsweep-prepared"
WEIGHT_SUFFIXES = (".safetensors", ".bin")


@dataclass(frozen=True)
class Location:
    source: str            # "local" | "gguf" | "hub"
    path: str              # folder (local, gguf) or hub id
    gguf_file: str | None  # file name inside `path` for GGUF

    @property
    def model_id(self) -> str:
        return f"{self.path}/{self.gguf_file}" if self.gguf_file else self.path


def _looks_like_hub_id(text: str) -> bool:
    parts = text.split("/")
    return len(parts) == 2 and all(parts) and not text.startswith((".", "~")) and "\\" not in text


def locate(path: str, gguf_file: str | None = None) -> Location:
    """Resolve a spec path, or raise a ModelSetupError that says what to do."""
    local = Path(path).expanduser()
    if gguf_file:
        if not (local / gguf_file).is_file() and not _looks_like_hub_id(path):
            raise ModelSetupError(f"GGUF file not found: {local / gguf_file}")
        source = "gguf" if local.is_dir() else "hub"
        return Location(source, str(local.resolve()) if source == "gguf" else path, gguf_file)
    if local.is_file() and local.suffix == ".gguf":
        return Location("gguf", str(local.resolve().parent), local.name)
    if local.is_dir():
        if not (local / "config.json").is_file():
            raise ModelSetupError(
                f"{local} is not a complete checkpoint (no config.json)"
                + (f"; prepare it with `kernelsweep prepare-model --out {path}`" if not any(local.iterdir()) else ""))
        return Location("local", str(local.resolve()), None)
    if _looks_like_hub_id(path) and not local.exists():
        return Location("hub", path, None)
    raise ModelSetupError(
        f"checkpoint not found: {path} (resolved to {local.resolve()}). Give a checkpoint folder, a .gguf file or a "
        f"hub id (org/name); the embedded model is prepared with `kernelsweep prepare-model --out {path}`")


def read_marker(folder: str | Path) -> dict | None:
    marker = Path(folder) / MARKER
    try:
        return json.loads(marker.read_text())
    except (OSError, ValueError):
        return None


def marker_is_complete(folder: str | Path) -> bool:
    """The marker exists and every file it lists is there with its recorded size."""
    info = read_marker(folder)
    if not info or not isinstance(info.get("files"), dict):
        return False
    for name, entry in info["files"].items():
        file = Path(folder) / name
        if not file.is_file() or file.stat().st_size != entry.get("size"):
            return False
    return True


def file_digests(folder: str | Path) -> dict[str, dict]:
    """{name: {size, sha256}} for every regular file of a folder except the marker."""
    out = {}
    for file in sorted(Path(folder).iterdir()):
        if file.is_file() and file.name != MARKER:
            h = hashlib.sha256()
            with open(file, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 22), b""):
                    h.update(chunk)
            out[file.name] = {"size": file.stat().st_size, "sha256": h.hexdigest()}
    return out


def revision_of(digests: dict[str, dict]) -> str:
    """One digest over the files' digests: identical weights give the same revision."""
    payload = json.dumps({name: d["sha256"] for name, d in sorted(digests.items())}, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(payload.encode()).hexdigest()


def _unverified(files: list[Path]) -> str:
    h = hashlib.sha256()
    for file in files:
        h.update(file.name.encode())
        if file.suffix in WEIGHT_SUFFIXES or file.suffix == ".gguf":
            h.update(str(file.stat().st_size).encode())
        else:
            h.update(file.read_bytes())
    return "unverified-sha256:" + h.hexdigest()


def local_revision(folder: str | Path, gguf_file: str | None = None) -> str:
    """The revision recorded by the marker; for a folder without one (or a GGUF
    file), a digest of its small files plus the weights' names and sizes, marked
    `unverified`: hashing gigabytes of weights on every call would cost more
    than the call."""
    folder = Path(folder)
    if gguf_file:
        return _unverified([folder / gguf_file])
    info = read_marker(folder)
    if info and info.get("revision"):
        return info["revision"]
    return _unverified(sorted(f for f in folder.iterdir() if f.is_file()))
