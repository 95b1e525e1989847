"""The agent's own folder. Paths are names inside it: absolute paths, `..` and
symlinks out of it are refused, so the editor never reaches the evaluator's
code, the hidden inputs or another cell's files."""

from __future__ import annotations

import shutil
from pathlib import Path

MAX_FILE_CHARS = 200_000
REFERENCE_FILE = "reference.py"


class WorkspaceError(ValueError):
    """A refused editor request; the message is the observation the agent reads."""


class Workspace:
    def __init__(self, root: Path):
        self.root = root

    def reset(self, reference_source: str) -> None:
        """An empty workspace holding only the task (the state before step 0)."""
        if self.root.exists():
            shutil.rmtree(self.root)
        self.root.mkdir(parents=True)
        (self.root / REFERENCE_FILE).write_text(reference_source, encoding="utf-8")

    def resolve(self, name: str) -> Path:
        name = str(name or "").strip()
        if not name or Path(name).is_absolute():
            raise WorkspaceError(f"path must be a file name inside the workspace, got {name!r}")
        root = self.root.resolve()
        path = (root / name).resolve()
        if path != root and root not in path.parents:
            raise WorkspaceError(f"{name!r} is outside the workspace")
        return path

    def write(self, name: str, content: str) -> str:
        if len(content) > MAX_FILE_CHARS:
            raise WorkspaceError(f"file too large ({len(content)} characters; limit {MAX_FILE_CHARS})")
        path = self.resolve(name)
        if path.name == REFERENCE_FILE and path.parent == self.root.resolve():
            raise WorkspaceError(f"{REFERENCE_FILE} is the task; write your code to another file")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"wrote {name} ({content.count(chr(10)) + 1} lines)"

    def edit(self, name: str, old: str, new: str) -> str:
        path = self.resolve(name)
        if not path.is_file():
            raise WorkspaceError(f"{name} does not exist")
        text = path.read_text(encoding="utf-8")
        count = text.count(old) if old else 0
        if count != 1:
            raise WorkspaceError(f"`old` occurs {count} times in {name}; it must occur exactly once")
        return self.write(name, text.replace(old, new, 1)).replace("wrote", "edited")

    def view(self, name: str, max_chars: int) -> str:
        path = self.resolve(name)
        if path.is_dir():
            root = self.root.resolve()
            names = sorted(p.relative_to(path).as_posix() for p in path.rglob("*")
                           if p.is_file() and root in p.resolve().parents
                           and not any(part.startswith(".") for part in p.relative_to(path).parts))
            return "\n".join(names) or "(empty)"
        if not path.is_file():
            raise WorkspaceError(f"{name} does not exist")
        lines = path.read_text(encoding="utf-8", errors="replace").split("\n")
        shown = "\n".join(f"{i:4d}  {line}" for i, line in enumerate(lines, 1))
        return shown if len(shown) <= max_chars else shown[:max_chars] + "\n… (cut)"

    def read(self, name: str) -> str | None:
        path = self.resolve(name)
        return path.read_text(encoding="utf-8") if path.is_file() else None
