"""Output files: how an output ({"structure", "leaves"}) crosses from a worker
to the reference's worker, which judges it.

Plain dense tensors go into one raw file: a JSON header (structure, and per
leaf a number, or a tensor's dtype, shape and offset), then the tensors'
bytes. The writer copies each tensor from the device straight into the
file's mapping; the reader reads each tensor's bytes into it (on the host)
or through a pinned staging buffer (to the device), from a descriptor it
checked to be a regular file of bounded size. torch.save/torch.load moved
every output through host buffers and a checksum on both sides, which made
the files most of a GiB-output task's held device time
(docs/decisions/2026-12-03-output-files.md). Any other output (a tensor
subclass, a sparse layout, a dtype with no raw form) is written with
torch.save as before, and read with weights_only: a file the candidate's process wrote never runs code here.

Imported before any candidate code runs, so the torch functions kept here are
the real ones."""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from typing import Any

import torch

from kernelsweep.evaluator.untrusted.trees import plain, portable_leaves

MAGIC = b"KSOUT1\n"
ALIGN = 64
MAX_HEADER = 1 << 24


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


DTYPES = {dtype_name(d): d for d in (
    torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.complex64, torch.complex128,
    torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool)}

_from_file = torch.from_file
_save = torch.save
_load = torch.load
_empty = torch.empty


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def raw(leaves: list) -> bool:
    """Plain leaves (trees.plain) whose tensors all have a dtype with a raw form
    here (DTYPES): what goes into an output file raw, or crosses the device
    buffer (devicehandoff.py)."""
    return plain(leaves) and all(dtype_name(x.dtype) in DTYPES for x in leaves if isinstance(x, torch.Tensor))


def _data_start(header_bytes: int) -> int:
    return _aligned(len(MAGIC) + 8 + header_bytes)


def _fresh(path: str | os.PathLike) -> Any:
    """PATH as a new regular file, open for writing: whatever a candidate put
    at that name beforehand (a pipe whose writer would block, a link to write
    through) is removed first, and the file is made without following a link."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    return os.fdopen(fd, "wb")


def save_output(output: dict[str, Any], path: str | os.PathLike) -> None:
    """Write {"structure", "leaves"} (leaves on any device) to PATH."""
    leaves = output["leaves"]
    if not raw(leaves):
        with _fresh(path) as f:
            _save({"structure": output["structure"], "leaves": portable_leaves(leaves)}, f)
        return
    described, offset = [], 0
    for x in leaves:
        if isinstance(x, torch.Tensor):
            nbytes = x.numel() * x.element_size()
            described.append({"dtype": dtype_name(x.dtype), "shape": list(x.shape),
                              "offset": offset, "nbytes": nbytes})
            offset += _aligned(nbytes)
        else:
            described.append({"number": x, "type": type(x).__name__})
    header = json.dumps({"structure": output["structure"], "leaves": described}).encode()
    start = _data_start(len(header))
    with _fresh(path) as f:
        f.write(MAGIC + len(header).to_bytes(8, "little") + header)
        f.flush()
        # Allocated now: a full disk is an OSError here, not a SIGBUS in the copy below.
        os.posix_fallocate(f.fileno(), 0, start + offset)
        if offset:
            # Mapped through the open descriptor: the file made above, whatever stands at its name now.
            by_fd = f"/proc/self/fd/{f.fileno()}"
            mapped = _from_file(by_fd if os.path.exists(by_fd) else str(path), shared=True,
                                size=start + offset, dtype=torch.uint8)
            for x, d in zip(leaves, described):
                if isinstance(x, torch.Tensor) and d["nbytes"]:
                    byte_view(mapped, start + d["offset"], d).copy_(x.detach())
            del mapped  # unmapped: the bytes are in the file


class NotAnOutputFile(ValueError):
    """The path is not a regular file (a link, a pipe, a device, a folder):
    the harness writes only regular files there, so the candidate's process
    put it in their place."""


def open_regular(path: str | os.PathLike, limit: int) -> int:
    """A descriptor for PATH, opened without following a link and without
    blocking (a pipe put in a file's place opens at once, and is refused),
    checked to be a regular file of at most LIMIT bytes."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotAnOutputFile(f"{path} is a symbolic link") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise NotAnOutputFile(f"{path} is not a regular file (mode {stat.filemode(info.st_mode)})")
    if info.st_size > limit:
        os.close(fd)
        raise ValueError(f"{path}: {info.st_size} bytes, more than the {limit} an output of its reference's "
                         "size can take")
    return fd


def _read_exactly(fd: int, view: memoryview, offset: int, path: str) -> None:
    done = 0
    while done < len(view):
        got = os.preadv(fd, [view[done:]], offset + done)
        if got <= 0:  # shortened after it was opened
            raise ValueError(f"{path} ended at byte {offset + done}, inside its data")
        done += got


_STAGING_BYTES = 64 << 20


def _read_leaf(fd: int, at: int, d: dict[str, Any], device: torch.device | str, path: str) -> torch.Tensor:
    """One tensor leaf read from the file's bytes into a tensor of its own on
    DEVICE (read, never mapped: a file shortened while it is read is an error
    here, not a bus error that kills the judge)."""
    out = _empty(d["shape"], dtype=DTYPES[d["dtype"]], device=device)
    flat = out.view(-1).view(torch.uint8)
    if flat.device.type == "cpu":
        _read_exactly(fd, memoryview(flat.numpy()), at, path)
        return out
    staging = _empty(min(_STAGING_BYTES, d["nbytes"]), dtype=torch.uint8, pin_memory=True)
    for begin in range(0, d["nbytes"], len(staging)):
        n = min(len(staging), d["nbytes"] - begin)
        _read_exactly(fd, memoryview(staging.numpy())[:n], at + begin, path)
        flat[begin:begin + n].copy_(staging[:n])
    return out


def load_output(path: str | os.PathLike, device: torch.device | str = "cpu", *,
                limit: int = 1 << 62) -> dict[str, Any]:
    """An output file of at most LIMIT bytes, its tensors copied onto DEVICE
    (never views of the file: what the writer does to the file afterwards
    changes nothing here). Raises NotAnOutputFile for a path that is not a
    regular file, ValueError for a file that is not an output record."""
    path = str(path)
    fd = open_regular(path, limit)
    with os.fdopen(fd, "rb") as f:
        if f.read(len(MAGIC)) != MAGIC:  # torch.save's format: an output that is not plain
            f.seek(0)
            return _load_saved(f, path, device)
        size = int.from_bytes(f.read(8), "little")
        if not 0 < size <= MAX_HEADER:
            raise ValueError(f"{path}: header of {size} bytes")
        text = f.read(size)
        try:
            header = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"{path}: unreadable header ({exc})") from None
        start = _data_start(size)
        total = os.fstat(fd).st_size
        described = header.get("leaves") if isinstance(header, dict) else None
        if not isinstance(described, list) or not isinstance(header.get("structure"), str):
            raise ValueError(f"{path} is not an output record")
        for d in described:
            _check_leaf(d, total - start, path)
        leaves: list[Any] = []
        for d in described:
            if "number" in d:
                leaves.append(d["number"])
            elif d["nbytes"] == 0:
                leaves.append(_empty(d["shape"], dtype=DTYPES[d["dtype"]], device=device))
            else:
                leaves.append(_read_leaf(fd, start + d["offset"], d, device, path))
    return {"structure": header["structure"], "leaves": leaves}


def byte_view(buffer: torch.Tensor, at: int, d: dict[str, Any]) -> torch.Tensor:
    """The tensor described by D ({dtype, shape, nbytes}) at byte AT of a uint8 buffer."""
    return buffer[at:at + d["nbytes"]].view(DTYPES[d["dtype"]]).view(d["shape"])


def _check_leaf(d: Any, data_bytes: int, path: str) -> None:
    if not isinstance(d, dict):
        raise ValueError(f"{path}: a leaf is not described")
    if "number" in d:
        kind = {"bool": bool, "int": int, "float": float}.get(d.get("type"))
        if kind is None or type(d["number"]) is not kind:
            raise ValueError(f"{path}: a number leaf {str(d)[:200]}")
        return
    dtype, shape, offset, nbytes = d.get("dtype"), d.get("shape"), d.get("offset"), d.get("nbytes")
    if dtype not in DTYPES or not isinstance(shape, list) or not all(
            type(n) is int and n >= 0 for n in shape) or type(offset) is not int or type(nbytes) is not int:
        raise ValueError(f"{path}: a tensor leaf described as {str(d)[:200]}")
    if nbytes != math.prod(shape) * DTYPES[dtype].itemsize or offset < 0 or offset % ALIGN \
            or offset + nbytes > data_bytes:
        raise ValueError(f"{path}: a tensor leaf of {nbytes} bytes at {offset} does not fit its shape or the file")


def _load_saved(f: Any, path: str, device: torch.device | str) -> dict[str, Any]:
    obj = _load(f, map_location=device, weights_only=True)
    if not isinstance(obj, dict) or not isinstance(obj.get("structure"), str) or not isinstance(obj.get("leaves"), list):
        raise ValueError(f"{path} is not an output record")
    return obj
