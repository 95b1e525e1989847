"""Output files: how an output ({"structure", "leaves"}) crosses from a worker
to the reference's worker, which judges it.

Plain dense tensors go into one raw file: a JSON header (structure, and per
leaf a number, or a tensor's dtype, shape and offset), then the tensors'
bytes. The writer copies each tensor from the device straight into the
file's mapping, and the reader maps the file and copies each tensor straight
to the device: one copy each way. torch.save/torch.load moved a 4 GiB output
through host buffers and a checksum on both sides; on the H200 a task with
4 GiB outputs spent ~90 s of its evaluation on these files (L1-005, L1-007,
L1-009). Any other output (a tensor subclass, a sparse layout, a dtype with
no raw form) is written with torch.save as before, and read with
weights_only: a file the candidate's process wrote never runs code here.

Imported before any candidate code runs, so the torch functions kept here are
the real ones."""

from __future__ import annotations

import json
import math
import os
from typing import Any

import torch

from kernelsweep.evaluator.workers.trees import plain, portable_leaves

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


def save_output(output: dict[str, Any], path: str | os.PathLike) -> None:
    """Write {"structure", "leaves"} (leaves on any device) to PATH."""
    leaves = output["leaves"]
    if not raw(leaves):
        _save({"structure": output["structure"], "leaves": portable_leaves(leaves)}, str(path))
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
    with open(path, "wb") as f:
        f.write(MAGIC + len(header).to_bytes(8, "little") + header)
        f.flush()
        # Allocated now: a full disk is an OSError here, not a SIGBUS in the copy below.
        os.posix_fallocate(f.fileno(), 0, start + offset)
    if offset:
        mapped = _from_file(str(path), shared=True, size=start + offset, dtype=torch.uint8)
        for x, d in zip(leaves, described):
            if isinstance(x, torch.Tensor) and d["nbytes"]:
                byte_view(mapped, start + d["offset"], d).copy_(x.detach())
        del mapped  # unmapped: the bytes are in the file


def load_output(path: str | os.PathLike, device: torch.device | str = "cpu") -> dict[str, Any]:
    """An output file, its tensors copied onto DEVICE (never views of the file:
    what the writer does to the file afterwards changes nothing here).
    Raises ValueError for a file that is not an output record."""
    path = str(path)
    text = None
    with open(path, "rb") as f:
        if f.read(len(MAGIC)) == MAGIC:
            size = int.from_bytes(f.read(8), "little")
            if not 0 < size <= MAX_HEADER:
                raise ValueError(f"{path}: header of {size} bytes")
            text = f.read(size)
    if text is None:  # torch.save's format: an output that is not plain
        return _load_saved(path, device)
    try:
        header = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{path}: unreadable header ({exc})") from None
    start = _data_start(size)
    total = os.path.getsize(path)
    described = header.get("leaves") if isinstance(header, dict) else None
    if not isinstance(described, list) or not isinstance(header.get("structure"), str):
        raise ValueError(f"{path} is not an output record")
    for d in described:
        _check_leaf(d, total - start, path)
    mapped = _from_file(path, shared=False, size=total, dtype=torch.uint8) if total > start else None
    leaves: list[Any] = []
    for d in described:
        if "number" in d:
            leaves.append(d["number"])
        elif d["nbytes"] == 0:
            leaves.append(_empty(d["shape"], dtype=DTYPES[d["dtype"]], device=device))
        else:
            source = byte_view(mapped, start + d["offset"], d)
            leaves.append(source.to(device, copy=True))
    del mapped
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


def _load_saved(path: str, device: torch.device | str) -> dict[str, Any]:
    obj = _load(path, map_location=device, weights_only=True)
    if not isinstance(obj, dict) or not isinstance(obj.get("structure"), str) or not isinstance(obj.get("leaves"), list):
        raise ValueError(f"{path} is not an output record")
    return obj
