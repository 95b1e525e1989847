"""The device buffer the reference's worker lends the candidate's
(untrusted/devicehandoff.py): its layout and what fits it on any machine; on a
GPU, the buffer itself shared with another process through a socket pair,
and the reference's reading of a handed output."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernelsweep.evaluator.untrusted import devicehandoff, outputfiles, reference

REPO = Path(__file__).resolve().parents[2]


def _layout(*outputs: list) -> tuple[dict, int]:
    return devicehandoff.slot_layout({f"trial{i}": devicehandoff.describe(o) for i, o in enumerate(outputs)})


def test_layout_gives_each_tensor_an_aligned_slot_and_numbers_none():
    layout, total = _layout([torch.zeros(3, 5), 2.5], [torch.zeros(7, dtype=torch.float16)])
    first, number = layout["trial0"]
    (second,) = layout["trial1"]
    assert number is None
    assert first == {"dtype": "float32", "shape": [3, 5], "nbytes": 60, "offset": 0}
    assert second["offset"] == devicehandoff.ALIGN and second["offset"] % 8 == 0
    assert total == 2 * devicehandoff.ALIGN


def test_only_outputs_of_the_slots_dtype_shape_and_structure_fit():
    layout, _ = _layout([torch.zeros(4, 4), 1])
    slots = layout["trial0"]
    assert devicehandoff.fits([torch.ones(4, 4), 3], slots)
    assert devicehandoff.fits([torch.ones(8, 8)[::2, ::2], 3.5], slots)  # a strided view is copied in
    assert not devicehandoff.fits([torch.ones(4, 4, dtype=torch.float64), 3], slots)
    assert not devicehandoff.fits([torch.ones(16), 3], slots)
    assert not devicehandoff.fits([torch.ones(4, 4)], slots)
    assert not devicehandoff.fits([3, torch.ones(4, 4)], slots)
    assert not devicehandoff.fits([torch.ones(4, 4), "3"], slots)
    assert not devicehandoff.fits([torch.ones(4, 4).to_sparse(), 3], slots)
    odd, _ = _layout([torch.zeros(2, dtype=torch.float8_e4m3fn)])  # no raw form: through a file, as before
    assert not devicehandoff.fits([torch.zeros(2, dtype=torch.float8_e4m3fn)], odd["trial0"])
    assert not outputfiles.raw([torch.zeros(2, dtype=torch.float8_e4m3fn)])


def test_a_mismatch_decided_before_any_value_needs_no_values():
    layout, _ = _layout([torch.zeros(4, 4), 1.0])
    slots = layout["trial0"]
    decided = devicehandoff.decided_without_values
    assert decided([torch.zeros(4, 5), 1.0], slots)                       # shape
    assert decided([torch.zeros(4, 4, dtype=torch.float64), 1.0], slots)  # dtype
    assert decided([torch.zeros(4, 4)], slots)                            # leaf count
    assert decided([1.0, torch.zeros(4, 4)], slots)                       # a number for the tensor
    assert not decided([torch.zeros(4, 4), 2.0], slots)                   # values decide
    assert not decided([torch.zeros(4, 4), torch.zeros(3)], slots)        # the first tensor's values come first
    number_first, _ = _layout([2, torch.zeros(3)])
    assert decided([2, torch.zeros(4)], number_first["trial0"])           # the number crosses as itself
    assert decided([torch.zeros(1), torch.zeros(3)], number_first["trial0"])


def test_reference_judges_a_described_output_only_where_no_value_is_needed():
    from kernelsweep.evaluator import compare

    layout, _ = _layout([torch.zeros(4, 4)])
    s = SimpleNamespace(layout=layout)
    wrong_shape = devicehandoff.described({"structure": "T", "leaves": [torch.ones(4, 5)]})
    theirs = reference._described(s, "trial0", wrong_shape)
    assert theirs["leaves"][0].is_meta
    result = compare.compare_outputs({"structure": "T", "leaves": [torch.zeros(4, 4)]}, theirs, 1e-4, 1e-4)
    assert not result["ok"] and result["kind"] == "shape", result
    same_shape = devicehandoff.described({"structure": "T", "leaves": [torch.ones(4, 4)]})
    for forged in (same_shape, {"structure": "T", "leaves": [{"dtype": "float32", "shape": [-1]}]},
                   {"structure": "T", "leaves": [{"dtype": "object", "shape": [4]}]}, {"leaves": []},
                   {"structure": "T", "leaves": ["4"]}):
        with pytest.raises(ValueError):
            reference._described(s, "trial0", forged)


def _lender(layout: dict, buffer: torch.Tensor) -> SimpleNamespace:
    return SimpleNamespace(layout=layout, lent=SimpleNamespace(tensor=buffer, nbytes=buffer.numel()))


def test_reference_reads_a_handed_output_from_its_own_layout_only():
    layout, total = _layout([torch.zeros(2, 3), 0])
    buffer = torch.zeros(total, dtype=torch.uint8)
    devicehandoff.slot_view(buffer, layout["trial0"][0]).copy_(torch.arange(6.0).view(2, 3))
    s = _lender(layout, buffer)
    out = reference._handed(s, "trial0", {"structure": "T(L,N)", "numbers": [None, 7]})
    assert out["structure"] == "T(L,N)" and out["leaves"][1] == 7
    assert torch.equal(out["leaves"][0], torch.arange(6.0).view(2, 3))
    buffer.fill_(0)  # written again after the reference took it: its copy stands
    assert out["leaves"][0].sum() == 15
    for handed in ({"structure": "T", "numbers": [None]}, {"structure": 1, "numbers": [None, 7]},
                   {"structure": "T", "numbers": [None, "7"]}, {"structure": "T", "numbers": [None, [7]]}, []):
        with pytest.raises(ValueError):
            reference._handed(s, "trial0", handed)
    with pytest.raises(ValueError):
        reference._handed(s, "probe_nan", {"structure": "T", "numbers": [None, 7]})
    with pytest.raises(ValueError):
        reference._handed(SimpleNamespace(layout=layout, lent=None), "trial0", {"structure": "T", "numbers": [None, 7]})


def test_outputs_too_big_for_one_buffer_lend_one_for_the_first_that_fit(tmp_path):
    """A buffer for the first outputs whole, in layout order; the candidate's
    worker hands those and saves the rest to files; the reference reads no
    slot beyond the buffer, whatever the candidate's reply says."""
    from kernelsweep.evaluator.untrusted import candidate

    outputs = [[torch.full((300,), float(i))] for i in range(3)]  # 1200 bytes each, 1536 with alignment
    layout, total = _layout(*outputs)
    second_end = layout["trial1"][0]["offset"] + 1200
    assert devicehandoff.lendable_bytes(layout, total) == (layout["trial2"][0]["offset"] + 1200, 3)
    assert devicehandoff.lendable_bytes(layout, second_end) == (second_end, 2)
    assert devicehandoff.lendable_bytes(layout, layout["trial2"][0]["offset"] + 1199) == (second_end, 2)
    assert devicehandoff.lendable_bytes(layout, 1199) == (0, 0)
    numbers_only = {"trial0": [None], "trial1": layout["trial0"]}
    assert devicehandoff.lendable_bytes(numbers_only, 1200) == (1200, 2)

    buffer = torch.zeros(second_end, dtype=torch.uint8)
    lent = SimpleNamespace(tensor=buffer, nbytes=second_end)
    worker = SimpleNamespace(private=tmp_path)
    delivered = [candidate._deliver(worker, f"trial{i}", {"structure": "T", "leaves": out}, lent, layout[f"trial{i}"])
                 for i, out in enumerate(outputs)]
    assert ["handed" in d for d in delivered] == [True, True, False]
    assert (tmp_path / "trial2.pt").is_file() and not (tmp_path / "trial0.pt").exists()

    s = _lender(layout, buffer)
    assert torch.equal(reference._handed(s, "trial1", delivered[1]["handed"])["leaves"][0], outputs[1][0])
    with pytest.raises(ValueError):  # claimed handed, but its slot lies past the buffer lent
        reference._handed(s, "trial2", {"structure": "T", "numbers": [None]})


def test_one_socket_pair_carries_a_descriptor_per_buffer():
    """The trials' buffer, then one per shape variant: each send and receive
    works on a duplicate of the pair's socket, which stays open on both ends."""
    mine, theirs = socket.socketpair()
    try:
        for payload in (b"trials", b"smaller_odd", b"larger_odd"):
            r, w = os.pipe()
            os.write(w, payload)
            os.close(w)
            devicehandoff.send_descriptor(mine.fileno(), r)  # closes r once sent
            fd = devicehandoff.receive_descriptor(theirs.fileno(), timeout_s=5.0)
            try:
                assert os.read(fd, 64) == payload
            finally:
                os.close(fd)
    finally:
        mine.close()
        theirs.close()


_BORROWER = textwrap.dedent("""
    import sys, torch
    from kernelsweep.evaluator.untrusted import devicehandoff
    sock_fd, nbytes = int(sys.argv[1]), int(sys.argv[2])
    torch.zeros(1, device="cuda")
    fd = devicehandoff.receive_descriptor(sock_fd)
    lent = devicehandoff.SharedBuffer.open(torch.device("cuda", 0), fd, nbytes)
    assert int(lent.tensor.sum()) == 0  # zeroed by the lender
    lent.tensor[:16].copy_(torch.arange(16, dtype=torch.uint8, device="cuda"))
    lent.close()
""")


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_buffer_crosses_to_another_process_through_the_socket_pair():
    device = torch.device("cuda", 0)
    torch.zeros(1, device=device)
    lent = devicehandoff.SharedBuffer.create(device, 1 << 20)
    mine, theirs = socket.socketpair()
    child = subprocess.Popen([sys.executable, "-c", _BORROWER, str(theirs.fileno()), str(lent.nbytes)],
                             pass_fds=[theirs.fileno()], env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin"})
    theirs.close()
    devicehandoff.send_descriptor(mine.detach(), lent.export())
    assert child.wait(timeout=120) == 0
    assert torch.equal(lent.tensor[:16].cpu(), torch.arange(16, dtype=torch.uint8))
    lent.close()
