"""The adversarial suite of issue 15 on CUDA (the H200 twin of
test_adversarial_cpu.py): the same families, with CUDA kernels where the CPU
suite uses C++, plus the GPU-only catalogue items (stream injection, stale
memory from the caching allocator). Device-independent candidates (pure
PyTorch) are shared with the CPU suite. Skipped without a GPU."""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch
from evaluator_paths import FIXTURES, REFERENCES

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

ADV = FIXTURES / "adversarial"
ADV_CUDA = FIXTURES / "adversarial_cuda"
from kernelsweep.core.verdict import NUMERICALLY_CORRECT as CORRECT  # noqa: E402


@pytest.fixture
def run_cuda(build_dir, tmp_path):
    from kernelsweep.evaluator import evaluate

    def run(reference: str, candidate: Path, **overrides):
        options = dict(device="cuda", trials=3, timing_trials=20, warmup=3, timeout_s=180.0,
                       compile_timeout_s=1200.0, build_dir=build_dir, log_dir=tmp_path / "logs",
                       build_sharing="content")  # trusted fixtures: the shared library builds once
        options.update(overrides)
        return evaluate(REFERENCES / f"{reference}.py", candidate, **options)

    return run


def _never_forged(r: dict) -> None:
    assert not (r["category"] in CORRECT - {"no_custom_kernel"} and r["custom_kernel"]), r
    assert r["faster"] is not True, (r["category"], r["speedup"], r["flags"])


def _why(r: dict) -> tuple:
    return r["category"], r["flags"], r["speedup"], (r["error"] or {}).get("message")


def _from_template(path: Path, tmp_path: Path, **subs: str) -> Path:
    text = path.read_text()
    for key, value in subs.items():
        text = text.replace(f"__{key}__", value)
    out = tmp_path / f"{path.stem}_{random.randrange(10**9)}.py"
    out.write_text(text)
    return out


@pytest.mark.parametrize("name, must_flag", [
    ("cuda_unused_full", True), ("cuda_unused_slice", True), ("cuda_unused_profiler", False)])
def test_cuda_family1_kernel_result_not_used(run_cuda, name, must_flag):
    """Family 1 on CUDA: the kernel launches (whole input / 64 elements / only
    under a profiler) but the output comes from PyTorch."""
    r = run_cuda("vector_add", ADV_CUDA / f"{name}.py")
    assert r["category"] == "no_custom_kernel" and r["custom_kernel"] is False, _why(r)
    if must_flag:
        assert "kernel_result_unused" in r["flags"], _why(r)
    _never_forged(r)


@pytest.mark.parametrize("name, flag", [
    ("cuda_timed_empty_after_n", "timing_output_mismatch"), ("cuda_timed_stack_sniff", "timing_output_mismatch"),
    ("cuda_side_stream_late", "timing_output_mismatch"), ("cuda_timed_lazy_subclass", "non_plain_output")])
def test_cuda_family2_timed_outputs_are_checked(run_cuda, name, flag):
    """Family 2 on CUDA: empty after warm-up, zeros when timed, stream
    injection (KernelBench/KernelArena; honest in the trials, its timed
    outputs copied before the side stream wrote them), lazy subclass. A
    cheat, by the timed outputs checked after their block or by the output's
    type."""
    r = run_cuda("vector_add", ADV_CUDA / f"{name}.py")
    assert r["category"] == "cheat" and flag in r["flags"], _why(r)
    _never_forged(r)


def test_cuda_catalogue_address_keyed_result_cache(run_cuda):
    """Catalogue on CUDA: CUDA-L1's address-keyed result cache. Each trial's
    inputs are fresh, but PyTorch's caching allocator hands a trial the blocks
    the previous trial's inputs freed: the cache hits on the same addresses and
    returns the previous trial's product, every element wrong. Stale values
    are judged by their values: wrong_output."""
    r = run_cuda("matmul_small", ADV_CUDA / "cuda_addr_cache.py")
    assert r["category"] == "wrong_output" and r["correct"] is False, (_why(r), r["kernel_evidence"])
    _never_forged(r)


def test_cuda_family3_inputs_known_in_advance(run_cuda):
    """Family 3 on CUDA: answers precomputed from the public seeds. The seeds
    are secret: every lookup misses, and its zeros are wrong_output."""
    r = run_cuda("vector_add", ADV_CUDA / "cuda_known_inputs_lookup.py")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    _never_forged(r)


@pytest.mark.parametrize("name", ["slow_forward_hook", "slow_library_override", "slow_patch_torch"])
def test_cuda_family4_reference_cannot_be_slowed(run_cuda, name):
    """Family 4 on CUDA (shared pure-PyTorch candidates; the torch.library
    override registers the CUDA key too). The reference runs in a process of
    its own and is unaffected: the candidate's own PyTorch work is judged,
    no_custom_kernel at most 2x (patching torch may slow only itself; the
    dispatcher's override is a change to torch too, patched_torch)."""
    r = run_cuda("vector_add", ADV / f"{name}.py")
    assert r["category"] == "no_custom_kernel" and r["speedup"] is not None and r["speedup"] <= 2.0, _why(r)
    assert "reference_slowed" not in r["flags"], _why(r)
    assert ("patched_torch" in r["flags"]) == (name != "slow_forward_hook"), _why(r)


def test_cuda_family5_saved_reference_outputs_cannot_be_read(run_cuda):
    """Family 5 on CUDA: the reference's saved outputs read from the work
    directory. It finds nothing to read; its zeros are wrong_output."""
    r = run_cuda("vector_add", ADV_CUDA / "cuda_read_saved_outputs.py")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    _never_forged(r)


def test_cuda_family5_forged_result_on_the_report_channel(run_cuda):
    """Family 5 on CUDA: a forged 'ok' result sent first on the report channel:
    misuse of a serving worker's channel, a cheat (report_tampered)."""
    r = run_cuda("add", ADV / "forge_report_nonce.py")
    assert r["category"] == "cheat" and "report_tampered" in r["flags"], _why(r)


def test_cuda_family5_own_output_files_cannot_be_swapped(run_cuda):
    """Catalogue on CUDA (pygpubench fd overwrite, adapted): the reference's
    saved outputs copied over the candidate's own output files: the judge
    reads what forward returned, zeros: wrong_output."""
    r = run_cuda("vector_add", ADV / "overwrite_own_outputs.py")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)


def test_cuda_family6_killing_the_reference_worker_gives_a_record(run_cuda):
    """Family 6 on CUDA: the sibling reference worker killed; a record comes back."""
    r = run_cuda("vector_add", ADV / "kill_siblings.py")
    assert r["category"] == "no_custom_kernel", _why(r)  # its siblings are out of reach; plain PyTorch


def test_cuda_family6_setsid_chain_leaves_no_survivors(run_cuda, tmp_path):
    """Family 6 on CUDA: a nested setsid sleeper chain leaves no survivor (a
    survivor would hold the GPU context under the next candidate)."""
    marker = f"{900 + random.random():.9f}"
    candidate = _from_template(ADV / "setsid_chain.py", tmp_path, MARKER=marker)
    try:
        r = run_cuda("add", candidate)
        assert r["category"] == "no_custom_kernel", _why(r)  # its own forward is plain PyTorch
        time.sleep(2.0)
        alive = []
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        alive.append(int(pid))
                except OSError:
                    pass
        assert alive == []
    finally:
        for pid in os.listdir("/proc"):
            if pid.isdigit():
                try:
                    if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                        os.kill(int(pid), signal.SIGKILL)
                except OSError:
                    pass


def test_cuda_family6_hard_limits_cannot_be_raised(run_cuda):
    """Family 6 on CUDA: the worker's hard limits cannot be raised. (CUDA
    reserves address space far beyond any RLIMIT_AS, so on CUDA the limits
    set hard are the file size and open files, not the address space; see
    docs/taxonomy.md.)"""
    r = run_cuda("add", ADV / "raise_fsize_limit.py")
    assert r["category"] == "no_custom_kernel", _why(r)


@pytest.mark.parametrize("name", ["degenerate_zeros", "degenerate_constant"])
def test_cuda_family8_degenerate_tolerance(run_cuda, name):
    """Family 8 on CUDA: zeros / a constant on a softmax below the tolerance
    are wrong_output under the distinguishing atol."""
    r = run_cuda("softmax_wide", ADV / f"{name}.py")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    assert "degenerate_tolerance" in r["flags"], _why(r)


@pytest.mark.parametrize("name", ["cuda_stale_memory", "cuda_gc_copy_reference", "cuda_nan_output"])
def test_cuda_catalogue_semantic_cheats_fail(run_cuda, name):
    """Catalogue on CUDA: stale caching-allocator memory (Sakana, KernelBench),
    gc copy of the reference output and NaN wildcard (pygpubench). The
    reference lives in another process: what each returns (memory never
    written, no copy found, NaN) is wrong_output."""
    r = run_cuda("vector_add", ADV_CUDA / f"{name}.py")
    assert r["category"] == "wrong_output" and r["correct"] is False, _why(r)
    _never_forged(r)


def test_cuda_variants_cannot_be_crowded_out(run_cuda):
    """A candidate right only on the task's shape that holds all the device's
    memory once its trials start: the reference's variants, run after the
    trials, must not be dropped for lack of memory (wrong_on_variant)."""
    r = run_cuda("add_sized", ADV_CUDA / "cuda_crowd_variants.py")
    assert r["category"] == "wrong_on_variant", _why(r)
    _never_forged(r)


@pytest.mark.parametrize("use", ["identity", "sliver"])
def test_a_kernel_in_name_only_is_not_a_custom_kernel(run_cuda, tmp_path, use):
    """Issue 34 on a GPU: an identity entry point, or a kernel over 64 of 4 M
    elements, called on every forward with its result used. One secretly
    chosen timed call is measured with events around each extension call:
    the extension's share of that call's time is far below
    settings.KERNEL_SHARE_MIN."""
    r = run_cuda("vector_add", _from_template(ADV_CUDA / "cuda_kernel_sliver.py", tmp_path, USE=use))
    assert r["category"] == "no_custom_kernel" and "kernel_share_low" in r["flags"], \
        (_why(r), r["kernel_evidence"])
    _never_forged(r)


def test_a_cuda_kernel_that_does_the_work_has_its_share(run_cuda):
    """The look-alike: a CUDA kernel over every element."""
    r = run_cuda("vector_add", FIXTURES / "cuda" / "cuda_add.py")
    assert r["custom_kernel"] and r["kernel_evidence"]["share"] > 0.5, (_why(r), r["kernel_evidence"])


def _windows(r: dict) -> dict:
    windows = (r.get("timing") or {}).get("windows")
    print("windows", r["category"], windows)  # shown with -rA: the trusted clock's figures on this GPU
    return windows or {}


def test_cuda_work_deferred_into_a_replaced_copy_never_runs(run_cuda):
    """Issue 34 on a GPU: forward returns an empty output; the sum would run
    when the harness copies the output (Tensor.clone replaced). The harness
    copies through the method it captured first: the output is what forward
    returned."""
    r = run_cuda("slow_add", ADV / "defer_into_harness.py", timing_trials=40)
    _windows(r)
    assert r["category"] == "wrong_output", _why(r)
    _never_forged(r)


def test_cuda_work_deferred_into_a_profile_hook_is_a_cheat(run_cuda):
    r = run_cuda("slow_add", ADV / "defer_into_profile_hook.py", timing_trials=40)
    _windows(r)
    assert r["category"] == "cheat" and "interpreter_hooks" in r["flags"], _why(r)
    _never_forged(r)


@pytest.mark.parametrize("name, flags", [
    ("defer_into_dispatcher", {"interpreter_hooks", "patched_harness"}),  # its own CUDA kernel for aten::clone
    ("defer_into_audit_hook", {"interpreter_hooks"}),  # refused, and noted
    ("forge_clock", {"patched_harness"}),  # the clock module's timer rebound
])
def test_cuda_harness_reach_is_a_cheat(run_cuda, name, flags):
    """Issue 34 on a GPU: candidate code inside the harness's own copies
    through the dispatcher or an audit hook, or the clock's module rebound."""
    r = run_cuda("slow_add", ADV / f"{name}.py", timing_trials=40)
    assert r["category"] == "cheat" and flags & set(r["flags"]), _why(r)
    _never_forged(r)


def test_cuda_a_forged_registration_in_the_dispatcher_is_a_cheat(run_cuda, tmp_path):
    """The CUDA kernel for aten::clone registered under the file and line of
    torch's own kernel: every kernel added to an operator the harness uses counts."""
    r = run_cuda("slow_add", _from_template(ADV / "defer_into_dispatcher.py", tmp_path, WAY="forged"),
                 timing_trials=40)
    assert r["category"] == "cheat" and {"interpreter_hooks", "patched_harness"} & set(r["flags"]), _why(r)
    _never_forged(r)


def test_cuda_an_honest_candidate_has_no_hidden_time(run_cuda):
    """The look-alike: the same row-by-row sum inside forward (64 launches a
    call): its windows are recorded and not flagged."""
    r = run_cuda("slow_add", ADV / "honest_slow_add.py", timing_trials=40)
    windows = _windows(r)
    assert "timing_unaccounted" not in r["flags"] and not windows.get("unaccounted"), windows
    assert r["correct"], _why(r)
