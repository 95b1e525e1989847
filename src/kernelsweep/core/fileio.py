"""Atomic result files and content hashes: every stage writes through here."""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write to a temp file in the same folder, fsync, then rename: a reader (or a
    resumed Snakemake run) never sees a half-written result."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = "wb" if isinstance(data, bytes) else "w"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item"):  # numpy / torch scalars
        return obj.item()
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def dumps(obj: Any) -> str:
    return json.dumps(obj, indent=2, sort_keys=False, default=_default, allow_nan=False) + "\n"


def write_json(path: str | os.PathLike, obj: Any) -> None:
    write_atomic(path, dumps(obj))


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


# Writes the machine refused: the disk, not the study, is at fault.
_STORAGE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exceeded",
                   errno.EROFS: "the file system is read-only", errno.EIO: "an I/O error"}


def storage_fault(error: BaseException) -> str | None:
    """The message for a write the machine refused (full disk, quota, read-only
    file system, I/O error), or None for any other error. Result files are
    written atomically, so such a failure leaves no half-written file."""
    if not isinstance(error, OSError) or error.errno not in _STORAGE_ERRNOS:
        return None
    where = f" writing {error.filename}" if error.filename else ""
    return (f"{_STORAGE_ERRNOS[error.errno]}{where} ({error.strerror}); nothing was recorded for this step. "
            "Free space (or fix the file system), then rerun the same command: finished results are kept")


def free_bytes(path: str | os.PathLike) -> int:
    """Free bytes on the file system that holds `path` (or would: its nearest existing parent)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return shutil.disk_usage(path).free
