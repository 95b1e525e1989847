"""The compile step classifies build failures exactly as the evaluation does,
without running anything it does not need to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from evaluator_paths import CPU, LIBRARY_CANDIDATE, REFERENCES

from kernelsweep.evaluator import compile_candidate


@pytest.mark.parametrize("candidate, expected", [
    ("cpp_bad_header", "hallucinated_api"),
    ("cpp_undeclared", "hallucinated_api"),
    ("cpp_compile_error", "compile_error"),
])
def test_build_failures_match_the_evaluation(run_eval, build_dir, tmp_path, candidate, expected):
    record = compile_candidate(CPU / f"{candidate}.py", device="cpu", build_dir=build_dir, timeout_s=600,
                               log_dir=tmp_path)
    assert record["category"] == expected and record["compiled"] is False
    assert record["error"]["message"] and record["log"]
    assert run_eval("add", candidate)["category"] == record["category"]


def test_nothing_to_build(build_dir):
    record = compile_candidate(CPU / "pytorch_only.py", device="cpu", build_dir=build_dir)
    assert record["compiled"] is None and record["category"] is None and record["builds"] == []
    assert compile_candidate(CPU / "empty.py", device="cpu", build_dir=build_dir)["category"] == "no_code"
    assert compile_candidate(CPU / "syntax_error.py", device="cpu", build_dir=build_dir)["category"] == "syntax_error"


def test_import_problems_are_left_to_the_evaluation(build_dir, tmp_path):
    record = compile_candidate(CPU / "hallucinated_kwarg.py", device="cpu", build_dir=build_dir, log_dir=tmp_path)
    assert record["category"] is None
    assert record["deferred"]["category"] == "hallucinated_api"


def test_library_build_is_recorded(cpu_library):
    build = cpu_library["builds"][0]
    assert build["ok"] and build["name"] == "ks_fixture_lib" and len(build["key"]) == 64
    assert cpu_library["candidate_sha256"] and cpu_library["wall_s"] >= cpu_library["compile_s"] >= 0


def test_a_build_killed_midway_does_not_stall_the_next(tmp_path):
    """A run killed mid-build (Snakemake or a SLURM job, SIGKILL) leaves torch's
    `lock` file in the build directory; the next build of the same extension
    must not wait on it until its time limit."""
    build = tmp_path / "build"
    starter = (f"from pathlib import Path; from kernelsweep.evaluator import compile_candidate; "
               f"compile_candidate(Path({str(LIBRARY_CANDIDATE)!r}), device='cpu', build_dir=Path({str(build)!r}))")
    proc = subprocess.Popen([sys.executable, "-c", starter], start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not list(build.rglob("ext/*/lock")) and proc.poll() is None:
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    stale = list(build.rglob("ext/*/lock"))
    assert stale, "the build finished or never started before the kill"
    record = compile_candidate(LIBRARY_CANDIDATE, device="cpu", build_dir=build, timeout_s=240, log_dir=tmp_path)
    assert record["compiled"] is True, (record["category"], record["error"])
    assert not any(p.exists() for p in stale)


@pytest.mark.slow
def test_a_build_in_forward_is_built_ahead_not_in_the_hold(tmp_path):
    """A candidate that builds its extension on the first forward: given the
    task's reference, the compile step builds it ahead (ModelNew constructed and
    called on the meta device), and the evaluation finds it cached, with no
    compiler time while it held the device. Without the reference, the
    evaluation builds it itself, inside the hold, and its record says so."""
    from kernelsweep.evaluator import evaluate

    candidate, reference = CPU / "cpp_add_lazy.py", REFERENCES / "add.py"
    options = dict(device="cpu", trials=2, timing_trials=5, warmup=1, timeout_s=120.0, compile_timeout_s=600.0,
                   log_dir=tmp_path / "logs")

    ahead_dir = tmp_path / "ahead"
    record = compile_candidate(candidate, device="cpu", build_dir=ahead_dir, reference=reference, log_dir=tmp_path)
    assert record["category"] is None and record["builds"] == []  # nothing is built at import
    built = record["ahead"]["builds"]
    assert [(b["name"], b["ok"], b["cached"]) for b in built] == [("ks_fixture_lazy", True, False)], record["ahead"]
    assert record["ahead"]["reached"] in ("forward", "done")
    judged = evaluate(reference, candidate, build_dir=ahead_dir, **options)
    assert judged["correct"] and judged["custom_kernel"], judged["category"]  # its timing verdict is not the point
    assert [(b["name"], b["cached"]) for b in judged["builds"]] == [("ks_fixture_lazy", True)]
    assert judged["build_in_hold_s"] == 0.0

    plain_dir = tmp_path / "plain"
    assert compile_candidate(candidate, device="cpu", build_dir=plain_dir, log_dir=tmp_path)["ahead"] is None
    judged = evaluate(reference, candidate, build_dir=plain_dir, **options)
    assert [(b["name"], b["cached"], b["in_hold"]) for b in judged["builds"]] == [("ks_fixture_lazy", False, True)]
    assert judged["build_in_hold_s"] > 0


@pytest.mark.slow
def test_a_build_behind_a_device_test_is_built_ahead(tmp_path):
    """A candidate that builds only when its inputs are on a GPU (`if
    x.is_cuda:`, as CUDA-L1's L1-047 does): for the CUDA target the step that
    builds ahead answers that test as a GPU would (its tensors are on the meta
    device), so the build is done before the device is held. Checked without
    a GPU: the kernel is C++, the step never touches a device."""
    record = compile_candidate(CPU / "cpp_add_lazy_guarded.py", device="cuda", build_dir=tmp_path / "b",
                               reference=REFERENCES / "add.py", log_dir=tmp_path, timeout_s=600)
    assert record["category"] is None and record["builds"] == []  # nothing is built at import
    built = record["ahead"]["builds"]
    assert [(b["name"], b["ok"]) for b in built] == [("ks_fixture_lazy_guarded", True)], record["ahead"]


def test_a_load_build_is_staged_from_its_folder_by_relative_name(tmp_path):
    """`load` from files: the sources and the C/C++/CUDA files in and below their
    folder are copied, once, into the build's folder under their relative names."""
    from kernelsweep.evaluator.untrusted import buildhooks

    src = tmp_path / "src"
    (src / "detail").mkdir(parents=True)
    (src / "kernel.cu").write_text('#include "common.cuh"\n#include "detail/impl.h"\n')
    (src / "common.cuh").write_text("// shared\n")
    (src / "detail" / "impl.h").write_text("// impl\n")
    (src / "notes.txt").write_text("not C\n")
    staged = buildhooks.staged_files([str(src / "kernel.cu")])
    assert sorted(staged) == ["common.cuh", "detail/impl.h", "kernel.cu"]
    build = tmp_path / "build"
    build.mkdir()
    paths = buildhooks._stage(build, staged, [str(src / "kernel.cu")])
    assert paths == [str(build / "src" / "kernel.cu")]
    assert (build / "src" / "detail" / "impl.h").read_text() == "// impl\n"
    before = (build / "src" / "kernel.cu").stat().st_mtime_ns
    (src / "kernel.cu").write_text("// changed: another key, another build folder\n")
    buildhooks._stage(build, staged, [str(src / "kernel.cu")])  # this folder's copy is left as it was
    assert (build / "src" / "kernel.cu").stat().st_mtime_ns == before


def test_a_load_build_from_a_crowded_or_ambiguous_folder_is_not_staged(tmp_path):
    from kernelsweep.evaluator.untrusted import buildhooks

    crowded = tmp_path / "crowded"
    crowded.mkdir()
    for i in range(buildhooks.STAGED_FILES_MAX + 1):
        (crowded / f"h{i}.h").write_text("")
    (crowded / "k.cpp").write_text("")
    assert buildhooks.staged_files([str(crowded / "k.cpp")]) is None
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    (one / "k.cpp").write_text("int a;")
    (two / "k.cpp").write_text("int b;")
    assert buildhooks.staged_files([str(one / "k.cpp"), str(two / "k.cpp")]) is None
    # a header found beside the source's folder, not in it: built where the candidate wrote it
    (tmp_path / "common.cuh").write_text("// shared\n")
    (one / "k.cpp").write_text('#include "../common.cuh"\n#include "torch/python.h"  // on the include path\n')
    assert buildhooks.staged_files([str(one / "k.cpp")]) is None
    (one / "k.cpp").write_text('#include "torch/python.h"  // on the include path: found there either way\n')
    assert list(buildhooks.staged_files([str(one / "k.cpp")])) == ["k.cpp"]
    # and the key still depends on the contents when nothing is staged
    key = buildhooks.extension_key("load", {"name": "x", "sources": [str(one / "k.cpp"), str(two / "k.cpp")]}, None)
    (two / "k.cpp").write_text("int c;")
    assert key != buildhooks.extension_key("load", {"name": "x", "sources": [str(one / "k.cpp"), str(two / "k.cpp")]},
                                           None)
