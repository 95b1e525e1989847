"""The reference worker's comparison (untrusted/reference.judge), in process on
the CPU: outputs kept in memory or spilled to private files past the budget
are judged alike, candidate files are read from the candidate's folder only
and moved out of it once read, and unreadable files are named, not fatal."""

from __future__ import annotations

from pathlib import Path

import torch

from kernelsweep.evaluator.untrusted import reference, trees


def _state(tmp_path: Path, budget: int) -> reference.State:
    s = reference.State()
    s.private, s.candidate_dir = tmp_path / "reference", tmp_path / "candidate"
    s.private.mkdir()
    s.candidate_dir.mkdir()
    s.device = torch.device("cpu")
    s.kept, s.kept_bytes, s.kept_budget = {}, 0, budget
    return s


def _candidate_file(s: reference.State, name: str, out) -> None:
    structure, leaves = trees.flatten_output(out)
    trees.save({"structure": structure, "leaves": trees.portable_leaves(leaves)}, s.candidate_dir / f"{name}.pt")


def test_kept_and_spilled_outputs_are_judged_alike(tmp_path):
    a, b = torch.arange(1000, dtype=torch.float32), torch.ones(1000)
    s = _state(tmp_path, budget=a.numel() * 4)  # room for the first output only
    reference._keep(s, "trial0", *trees.flatten_output(a))
    reference._keep(s, "trial1", *trees.flatten_output((a, b)))
    assert s.kept["trial0"] is not None and s.kept["trial1"] is None
    assert (s.private / "trial1.pt").is_file()  # spilled
    _candidate_file(s, "trial0", a.clone())
    _candidate_file(s, "trial1", (a.clone(), b + 1e-2))
    results = reference.judge(None, s, [{"name": "trial0", "file": "trial0.pt"},
                                        {"name": "trial1", "file": "trial1.pt"}], atol=1e-4, rtol=1e-4)["results"]
    assert results[0]["ok"] and not results[1]["ok"] and results[1]["kind"] == "values"
    assert "output 1" in results[1]["message"]
    assert not any(s.candidate_dir.iterdir()) and not (s.private / "trial1.pt").exists()
    assert s.kept == {} and s.kept_bytes == 0


def test_candidate_files_only_from_the_candidates_folder(tmp_path):
    s = _state(tmp_path, budget=1 << 20)
    out = torch.randn(64)
    reference._keep(s, "trial0", *trees.flatten_output(out))
    # The reference's own output, where a path could reach it: never read as the candidate's.
    trees.save({"structure": "T", "leaves": [out.clone()]}, tmp_path / "reference" / "copy.pt")
    result = reference.judge(None, s, [{"name": "trial0", "file": "../reference/copy.pt"}],
                             atol=1e-4, rtol=1e-4)["results"][0]
    assert not result["ok"] and "unreadable" in result
    assert (tmp_path / "reference" / "copy.pt").is_file()


def test_unreadable_and_identical_outputs(tmp_path):
    s = _state(tmp_path, budget=1 << 20)
    for i in range(3):
        reference._keep(s, f"trial{i}", *trees.flatten_output(torch.full((8,), float(i))))
    for i in range(2):
        _candidate_file(s, f"trial{i}", torch.zeros(8))  # the same answer whatever the inputs
    (s.candidate_dir / "trial2.pt").write_bytes(b"not a tensor file")
    results = reference.judge(None, s, [{"name": f"trial{i}", "file": f"trial{i}.pt", "grouped": True}
                                        for i in range(3)], atol=1e-4, rtol=1e-4)["results"]
    assert results[0]["ok"] and results[0]["same_as_first"]
    assert not results[1]["ok"] and results[1]["same_as_first"]
    assert "unreadable" in results[2] and not (s.candidate_dir / "trial2.pt").exists()


def test_a_judged_name_read_again_finds_nothing_and_odd_entries_are_moved_not_fatal(tmp_path):
    s = _state(tmp_path, budget=1 << 20)
    out = torch.randn(16)
    for name in ("trial0", "again", "odd"):
        reference._keep(s, name, *trees.flatten_output(out))
    _candidate_file(s, "trial0", out.clone())
    first = reference.judge(None, s, [{"name": "trial0", "file": "trial0.pt"}], atol=1e-4, rtol=1e-4)
    assert first["results"][0]["ok"] and not (s.candidate_dir / "trial0.pt").exists()
    # The same file name judged again, with nothing written since: unreadable, never the old output.
    again = reference.judge(None, s, [{"name": "again", "file": "trial0.pt"}], atol=1e-4, rtol=1e-4)
    assert "unreadable" in again["results"][0]
    (s.candidate_dir / "odd.pt").mkdir()  # a folder where the output file should be
    odd = reference.judge(None, s, [{"name": "odd", "file": "odd.pt"}], atol=1e-4, rtol=1e-4)
    assert "unreadable" in odd["results"][0] and not (s.candidate_dir / "odd.pt").exists()


def test_the_kept_budget_leaves_the_candidate_room():
    gb = 10**9
    budget = reference.kept_budget_bytes
    # A large device, a task that needs little: a third of it kept (no spill of 4 GiB outputs).
    assert budget(141 * gb, 5 * gb) == int(141 * gb * reference.KEPT_MAX_SHARE)
    # Between the bounds: the candidate keeps four times what the reference needed.
    assert budget(80 * gb, 15 * gb) == 80 * gb - reference.CANDIDATE_ROOM * 15 * gb
    # A small device or a big task: never less than the floor share.
    assert budget(24 * gb, 8 * gb) == int(24 * gb * reference.KEPT_SHARE)


def test_a_spilled_output_comes_back_only_when_asked(tmp_path):
    s = _state(tmp_path, budget=0)
    out = torch.arange(10, dtype=torch.float32)
    assert reference._keep(s, "trial1", *trees.flatten_output(out)) is None
    back = reference._keep(s, "trial0", *trees.flatten_output(out), host_copy=True)
    assert torch.equal(back["leaves"][0], out) and s.kept == {"trial1": None, "trial0": None}


def test_running_out_of_host_memory_is_no_failure_of_the_reference():
    """A variant (or the float64 twin) that cannot be built ahead for want of
    host memory is tried again in the hold, never judged by that failure."""
    torch_host_oom = RuntimeError("[enforce fail at alloc_cpu.cpp:118] data. DefaultCPUAllocator: can't allocate "
                                  "memory: you tried to allocate 68719476736 bytes. Error code 12")
    assert reference._out_of_memory(torch_host_oom) and reference._out_of_memory(MemoryError())
    assert not reference._out_of_memory(ValueError("num_channels (65) must be divisible by num_groups (8)"))
    assert not reference._out_of_memory(RuntimeError("shape '[9, 8, -1]' is invalid for input of size 297"))
