"""Output files between the workers (untrusted/outputfiles.py): plain tensors
go through one raw file, copied straight between the device and the file's
mapping; anything else through torch.save; what the candidate's process
wrote is validated before it is read, and never runs code in the reader."""

from __future__ import annotations

import json
import os
import pickle

import pytest
import torch

from kernelsweep.evaluator.untrusted import outputfiles, trees


def roundtrip(tmp_path, out):
    structure, leaves = trees.flatten_output(out)
    path = tmp_path / "o.pt"
    outputfiles.save_output({"structure": structure, "leaves": leaves}, path)
    return path, structure, leaves, outputfiles.load_output(path)


def test_plain_outputs_round_trip_bit_for_bit(tmp_path):
    base = torch.randn(6, 5, dtype=torch.float64)
    out = {"x": base.t(),  # a non-contiguous view: only its own elements are written
           "parts": [torch.randn(3).to(torch.bfloat16), torch.tensor(7, dtype=torch.int16),
                     torch.zeros(0, 4), torch.tensor([True, False]), torch.randn(2, dtype=torch.complex64),
                     torch.tensor([float("nan"), float("inf")], dtype=torch.float16)],
           "n": (3, 2.5, True, float("nan"))}
    path, structure, leaves, loaded = roundtrip(tmp_path, out)
    assert path.read_bytes().startswith(outputfiles.MAGIC)
    assert loaded["structure"] == structure
    for mine, theirs in zip(leaves, loaded["leaves"]):
        if isinstance(mine, torch.Tensor):
            assert theirs.dtype == mine.dtype and theirs.shape == mine.shape and theirs.is_contiguous()
            assert torch.equal(theirs.reshape(-1).view(torch.uint8), mine.contiguous().reshape(-1).view(torch.uint8))
        elif isinstance(mine, float) and mine != mine:
            assert theirs != theirs
        else:
            assert theirs == mine and type(theirs) is type(mine)
    # only the view's 30 doubles are in the file, not a second copy of its storage
    assert os.path.getsize(path) < 4096


def test_loaded_tensors_are_copies_of_the_file(tmp_path):
    path, _, _, loaded = roundtrip(tmp_path, torch.ones(1000))
    with open(path, "r+b") as f:  # the writer rewrites its file after the reader loaded it
        f.seek(-4000, os.SEEK_END)
        f.write(bytes(4000))
    assert bool((loaded["leaves"][0] == 1).all())


def test_other_outputs_fall_back_to_torch_save(tmp_path):
    odd = torch.tensor([0.5, 2.0]).to(torch.float8_e4m3fn)  # a dtype with no raw form here
    path, structure, _, loaded = roundtrip(tmp_path, [odd, torch.ones(2)])
    assert not path.read_bytes().startswith(outputfiles.MAGIC)
    assert loaded["structure"] == structure and loaded["leaves"][0].dtype == torch.float8_e4m3fn
    assert torch.equal(loaded["leaves"][0].float(), odd.float()) and torch.equal(loaded["leaves"][1], torch.ones(2))


def _header_file(tmp_path, header: dict, data: bytes = b"") -> str:
    raw = json.dumps(header).encode()
    start = -(-(len(outputfiles.MAGIC) + 8 + len(raw)) // outputfiles.ALIGN) * outputfiles.ALIGN
    blob = outputfiles.MAGIC + len(raw).to_bytes(8, "little") + raw
    path = tmp_path / "forged.pt"
    path.write_bytes(blob + bytes(start - len(blob)) + data)
    return str(path)


@pytest.mark.parametrize("leaf, why", [
    ({"dtype": "float32", "shape": [1 << 20], "offset": 0, "nbytes": 4 << 20}, "beyond the file"),
    ({"dtype": "float32", "shape": [4], "offset": 0, "nbytes": 8}, "bytes do not match the shape"),
    ({"dtype": "object", "shape": [1], "offset": 0, "nbytes": 8}, "no such dtype"),
    ({"dtype": "float32", "shape": [-1], "offset": 0, "nbytes": 4}, "negative size"),
    ({"dtype": "float32", "shape": [1], "offset": 3, "nbytes": 4}, "unaligned"),
    ({"number": "1", "type": "int"}, "a string as a number"),
])
def test_forged_headers_are_refused(tmp_path, leaf, why):
    path = _header_file(tmp_path, {"structure": "T", "leaves": [leaf]}, bytes(64))
    with pytest.raises(ValueError):
        outputfiles.load_output(path)


def test_a_pickle_that_runs_code_is_refused(tmp_path):
    class Boom:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "ran"),))

    path = tmp_path / "evil.pt"
    torch.save({"structure": "T", "leaves": [Boom()]}, path, pickle_module=pickle)
    with pytest.raises(Exception):
        outputfiles.load_output(path)
    assert not (tmp_path / "ran").exists()
