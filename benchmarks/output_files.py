"""How fast an output crosses between workers as a file (untrusted/outputfiles.py),
against a chunked copy through a pinned host buffer, on each given folder.

A task with GiB-sized outputs spends most of its held device time in these
files when they are slow (docs/decisions/2026-12-03-output-files.md). Prints,
per folder and way: seconds per output to write (device -> file) and to read
(file -> device), to delete it, and GB/s. Every output is written first,
then each is read and deleted, as the evaluator's workers do.

    python benchmarks/output_files.py --device cuda --gib 4 --count 3 --dirs /tmp,/dev/shm
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from kernelsweep.evaluator.untrusted import outputfiles

CHUNK = 64 << 20


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def save_pinned(x: torch.Tensor, path: Path, buffer: torch.Tensor) -> None:
    flat = x.detach().contiguous().reshape(-1).view(torch.uint8)
    with open(path, "wb", buffering=0) as f:
        for at in range(0, flat.numel(), CHUNK):
            n = min(CHUNK, flat.numel() - at)
            buffer[:n].copy_(flat[at:at + n])
            f.write(memoryview(buffer[:n].numpy()))


def load_pinned(path: Path, like: torch.Tensor, device: torch.device, buffer: torch.Tensor) -> torch.Tensor:
    out = torch.empty(like.shape, dtype=like.dtype, device=device)
    flat = out.reshape(-1).view(torch.uint8)
    with open(path, "rb", buffering=0) as f:
        for at in range(0, flat.numel(), CHUNK):
            n = min(CHUNK, flat.numel() - at)
            got = f.readinto(memoryview(buffer[:n].numpy()))
            assert got == n
            flat[at:at + n].copy_(buffer[:n])
    return out


def run(device: torch.device, gib: float, count: int, folder: str, way: str) -> dict:
    n = int(gib * (1 << 30) / 4)
    pinned = torch.empty(CHUNK, dtype=torch.uint8, pin_memory=device.type == "cuda")
    writes, reads, unlinks = [], [], []
    x = torch.rand(n, device=device)
    with tempfile.TemporaryDirectory(dir=folder, prefix="ks-outbench-") as tmp:
        paths = [Path(tmp) / f"out{i}.pt" for i in range(count)]
        for path in paths:  # as the evaluator does: every trial's output written, then each judged
            _sync(device)
            started = time.perf_counter()
            if way == "mapped":
                outputfiles.save_output({"structure": "T", "leaves": [x]}, path)
            else:
                save_pinned(x, path, pinned)
            writes.append(time.perf_counter() - started)
        for path in paths:
            started = time.perf_counter()
            if way == "mapped":
                y = outputfiles.load_output(path, device)["leaves"][0]
            else:
                y = load_pinned(path, x, device, pinned)
            _sync(device)
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            path.unlink()
            unlinks.append(time.perf_counter() - started)
            assert torch.equal(x, y)
            del y
    gb = n * 4 / 1e9
    return {"folder": folder, "way": way, "gib": gib, "count": count,
            "write_s": round(statistics.median(writes), 3), "read_s": round(statistics.median(reads), 3),
            "write_gbs": round(gb / statistics.median(writes), 2), "read_gbs": round(gb / statistics.median(reads), 2),
            "unlink_s": round(statistics.median(unlinks), 3),
            "writes": [round(t, 3) for t in writes], "reads": [round(t, 3) for t in reads],
            "unlinks": [round(t, 3) for t in unlinks]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--gib", type=float, default=4.0, help="size of one output")
    parser.add_argument("--count", type=int, default=3, help="outputs per folder and way")
    parser.add_argument("--dirs", default=tempfile.gettempdir(), help="comma-separated folders")
    parser.add_argument("--ways", default="mapped,pinned")
    parser.add_argument("--out", help="JSON file for the figures")
    args = parser.parse_args()
    device = torch.device(args.device)
    rows = []
    for folder in args.dirs.split(","):
        free = os.statvfs(folder)
        print(f"{folder}: {free.f_bavail * free.f_frsize / 2**30:.1f} GiB free", flush=True)
        for way in args.ways.split(","):
            row = run(device, args.gib, args.count, folder, way)
            rows.append(row)
            print(f"{folder:12} {way:7} write {row['write_s']:6.2f} s ({row['write_gbs']:5.2f} GB/s)  "
                  f"read {row['read_s']:6.2f} s ({row['read_gbs']:5.2f} GB/s)  unlink {row['unlink_s']:5.2f} s  "
                  f"{row['writes']} {row['reads']} {row['unlinks']}",
                  flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
