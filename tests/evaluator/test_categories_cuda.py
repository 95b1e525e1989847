"""The CUDA twin of test_categories_cpu.py: every CUDA fixture compiled in
parallel with no GPU visible (the compile step), then evaluated on the GPU in
a fixed order (a hang, an illegal memory access and a segfault are each
followed by a healthy evaluation on the same GPU), and the eval and compile
subcommands run once each. Skipped without a GPU; on the lent machines
scripts/gpu_eval_suite.sh runs it (`suite`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from evaluator_paths import CPU, CUDA, REFERENCES, REPO

from kernelsweep.core.verdict import SUCCESS_CATEGORIES

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

SUCCESS = frozenset(SUCCESS_CATEGORIES)
BUILD_FAILURES = frozenset({"hallucinated_api", "compile_error"})

# (id, reference, candidate, accepted categories, extra evaluate options), run in this order.
CASES = [
    ("cuda_kernel", "vector_add", CUDA / "cuda_add.py", SUCCESS, {}),
    ("triton_kernel", "vector_add", CUDA / "triton_add.py", SUCCESS, {}),
    ("built_not_launched", "vector_add", CUDA / "cuda_unused.py", {"no_custom_kernel"}, {}),
    # Its output still changes after forward returned (output_changed_after_return): a cheat, matched or not.
    ("side_stream_cheat", "vector_add", CUDA / "cuda_side_stream.py", {"cheat"}, {}),
    ("illegal_memory_access", "vector_add", CUDA / "cuda_illegal_access.py", {"crash"}, {}),
    ("healthy_after_illegal_access", "vector_add", CUDA / "cuda_add.py", SUCCESS, {}),
    ("host_segfault", "vector_add", CUDA / "cuda_segv.py", {"crash"}, {}),
    ("hung_kernel", "vector_add", CUDA / "cuda_spin.py", {"timeout"}, {"timeout_s": 25.0}),
    ("healthy_after_hang", "vector_add", CUDA / "cuda_add.py", SUCCESS, {}),
    ("device_out_of_memory", "vector_add", CUDA / "cuda_oom.py", {"out_of_memory"}, {}),
    ("missing_header", "vector_add", CUDA / "cuda_bad_header.py", {"hallucinated_api"}, {}),
    ("undefined_identifier", "vector_add", CUDA / "cuda_undeclared.py", {"hallucinated_api"}, {}),
    ("nvcc_type_error", "vector_add", CUDA / "cuda_compile_error.py", {"compile_error"}, {}),
    ("plain_pytorch", "add", CPU / "pytorch_only.py", {"no_custom_kernel"}, {}),
    ("mutates_inputs", "add", CPU / "cheat_mutate_inputs.py", {"cheat"}, {}),
    ("constant_reference", "softmax_singleton", CPU / "cheat_constant.py", {"indistinguishable"}, {}),
    ("wrong_output", "add", CPU / "wrong_output.py", {"wrong_output"}, {}),
    # Outputs that do not fit the reference's slots in the lent device buffer go through files.
    ("dtype_mismatch", "add", CPU / "dtype_mismatch.py", {"shape_mismatch"}, {}),
    ("pair_swapped", "pair_out", CPU / "pair_swapped.py", {"shape_mismatch"}, {}),
    ("pair_out", "pair_out", CPU / "pair_out.py", {"no_custom_kernel"}, {}),
    ("hallucinated_attribute", "add", CPU / "hallucinated_attr.py", {"hallucinated_api"}, {}),
    # A failed CUDA-graph capture in forward must not break the harness's later input draws.
    ("failed_graph_capture", "add", CUDA / "failed_graph_capture.py", {"no_custom_kernel"}, {}),
    # The GPU twin of the CPU case reads_first_input_address: a CUDA graph whose captured copy reads
    # its first call's input (as CUDA-L1's L2-005) is wrong in its trials, each at a new address.
    ("graph_on_stale_input", "add", CUDA / "graph_stale_input.py", {"wrong_output"}, {}),
    # Shape variants (kernelsweep.core.shapes): the grid sized for the task's N misses the larger variant's tail.
    ("grid_for_task_shape", "add_sized", CUDA / "cuda_fixed_grid.py", {"wrong_on_variant"}, {}),
    ("kernel_on_every_shape", "add_sized", CUDA / "cuda_add.py", SUCCESS, {}),
    ("single_shape_passes_it", "add_sized", CUDA / "cuda_fixed_grid.py", SUCCESS, {"shape_variants": 0}),
]
# The candidates the compile step builds (the Triton one compiles at its first call).
TO_BUILD = sorted({c[2] for c in CASES if c[2].parent == CUDA and "load_inline" in c[2].read_text()})


@pytest.fixture(scope="module")
def cuda_builds(build_dir, tmp_path_factory) -> dict:
    """The compile step for every CUDA candidate at once, as the study runs it."""
    from kernelsweep.evaluator import compile_candidate

    logs = tmp_path_factory.mktemp("compile-logs")
    with ThreadPoolExecutor(8) as pool:
        records = pool.map(lambda p: compile_candidate(p, device="cuda", build_dir=build_dir, timeout_s=600,
                                                       log_dir=logs / p.stem), TO_BUILD)
        return dict(zip(TO_BUILD, records))


def _brief(r: dict) -> str:
    error = (r.get("error") or {}).get("message") or ""
    return (f"{r['category']} flags={r.get('flags')} speedup={r.get('speedup')} gpu_s={r.get('gpu_s')} "
            f"wall_s={r.get('wall_s')} windows={(r.get('timing') or {}).get('windows')} err={error[:160]!r}")


def test_compile_step(cuda_builds):
    for path, record in cuda_builds.items():
        accepted = next(c[3] for c in CASES if c[2] == path)
        if accepted <= BUILD_FAILURES:
            assert record["compiled"] is False and record["category"] in accepted, (path.name, record)
        else:
            assert record["compiled"] is True, (path.name, record["category"], record["error"])


@pytest.mark.parametrize("reference, candidate, accepted, extra", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_category(cuda_builds, build_dir, tmp_path, reference, candidate, accepted, extra):
    from kernelsweep.evaluator import evaluate

    options = dict(device="cuda", trials=5, timing_trials=30, warmup=5, timeout_s=120.0, build_dir=build_dir,
                   log_dir=tmp_path / "logs")
    r = evaluate(REFERENCES / f"{reference}.py", candidate, **{**options, **extra})
    print(_brief(r))  # shown with -rA: the GPU run's record (scripts/gpu_eval_suite.sh)
    assert r["category"] in accepted, _brief(r)
    if r["trials_passed"] or r["category"] in ("wrong_output", "shape_mismatch"):
        # The trials' outputs crossed in the buffer the reference's worker lent (untrusted/devicehandoff.py).
        assert r["provenance"]["output_handoff"] == "device", _brief(r)
    for checked in (r.get("variants") or {}).get("checked") or []:  # each variant's output too
        assert checked["output_handoff"] == "device", r["variants"]
    if accepted == SUCCESS:
        assert r["custom_kernel"], _brief(r)
    if r["category"] == "wrong_on_variant":
        failed = r["variants"]["failed"]
        assert failed["name"] == "larger_odd" and failed["category"] == "wrong_output", _brief(r)
        assert [c["ok"] for c in r["variants"]["checked"]] == [True, False], r["variants"]


@pytest.mark.parametrize("candidate, rebuilt", [(CPU / "linear_relu_any_size.py", False),
                                                (CUDA / "linear_host_only_init.py", True),
                                                (CUDA / "linear_device_draw_init.py", True)])
def test_a_big_models_variants_are_built_on_the_device_in_the_hold(build_dir, tmp_path, candidate, rebuilt):
    """A task whose model is too big to build its variants ahead on the host
    (over 1 GiB): both workers build them in the hold with their tensors made
    on the device, under one seed. A ModelNew that cannot be built so (a host
    tensor added to its weights), or is wrong built so (a draw of its own on
    the device first), is built on the host, with the reference's Model
    again, and judged as KernelBench builds it."""
    from kernelsweep.evaluator import evaluate

    r = evaluate(REFERENCES / "linear_big.py", candidate, device="cuda", trials=3, timing_trials=10,
                 warmup=2, build_dir=build_dir, log_dir=tmp_path / "logs")
    print(_brief(r), r["variants"], r["stage_s"])
    assert r["category"] == "no_custom_kernel", _brief(r)
    checked = r["variants"]["checked"]
    assert len(checked) == 2 and all(c["ok"] and not c["built_ahead"] for c in checked), r["variants"]
    assert all(bool(c.get("rebuilt_on_host")) == rebuilt for c in checked), r["variants"]
    assert all(c["built_on_device"] != rebuilt for c in checked), r["variants"]
    if rebuilt:
        assert all("device" in c["rebuilt_on_host"] for c in checked), r["variants"]


def test_a_cupy_kernel_is_a_custom_kernel_by_its_work(build_dir, tmp_path):
    """CuPy builds with NVRTC into its own cache (under the home directory by
    default, read-only in the confined worker): it runs confined, and its kernel,
    from no known library, is the candidate's work in the profiled call."""
    pytest.importorskip("cupy")
    from kernelsweep.evaluator import evaluate

    r = evaluate(REFERENCES / "vector_add.py", CUDA / "cupy_add.py", device="cuda", trials=3, timing_trials=30,
                 warmup=5, build_dir=build_dir, log_dir=tmp_path / "logs")
    print(_brief(r), r["kernel_evidence"])
    assert r["category"] in SUCCESS and r["custom_kernel"], _brief(r)
    assert r["kernel_evidence"]["share"] >= 0.5, r["kernel_evidence"]


def test_a_numba_kernel_is_a_custom_kernel_by_its_work(build_dir, tmp_path):
    """Numba compiles its @cuda.jit kernel at the first call (its cache under
    NUMBA_CACHE_DIR, a writable folder of the evaluation): it runs confined, its
    launch is the candidate's by the kernel's name, and it does the work."""
    pytest.importorskip("numba.cuda")
    from kernelsweep.evaluator import evaluate

    broken = _numba_fails_to_compile()
    r = evaluate(REFERENCES / "vector_add.py", CUDA / "numba_add.py", device="cuda", trials=3, timing_trials=30,
                 warmup=5, build_dir=build_dir, log_dir=tmp_path / "logs")
    print(_brief(r), r["kernel_evidence"])
    if broken:  # an image whose numba and NumPy do not go together: the environment, not a made-up API
        assert r["category"] == "runtime_error", _brief(r)
        pytest.skip(f"numba compiles no kernel on this machine ({broken}); the candidate judged runtime_error")
    assert r["category"] in SUCCESS and r["custom_kernel"], _brief(r)
    assert r["kernel_evidence"]["launched"]["kernels"], r["kernel_evidence"]
    assert r["kernel_evidence"]["share"] >= 0.5, r["kernel_evidence"]


def _numba_fails_to_compile() -> str | None:
    """Why numba cannot compile and launch a kernel here (in a fresh
    process), or None: numba 0.68 with NumPy 2.5 fails at its first compile."""
    probe = ("import numpy as np\nfrom numba import cuda\n@cuda.jit\ndef k(a):\n    a[0] = 1\n"
             "a = cuda.to_device(np.zeros(1, dtype=np.float32))\nk[1, 1](a)\ncuda.synchronize()\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["failed"])[-1][:200]


def test_tf32_is_flagged_and_judged_at_its_accuracy(build_dir, tmp_path):
    """The reference multiplies with TF32 off; a candidate that turns it on is
    computed with it (wrong beyond fp32's tolerance on a 64x64 product of
    normal values on a GPU with TF32, as every target GPU has) and flagged."""
    from kernelsweep.evaluator import evaluate

    r = evaluate(REFERENCES / "matmul_small.py", CPU / "tf32_on.py", device="cuda", trials=3, timing_trials=10,
                 warmup=2, build_dir=build_dir, log_dir=tmp_path / "logs")
    print(_brief(r), r.get("max_abs_diff"))
    assert "reduced_precision_math" in r["flags"], _brief(r)
    assert r["category"] == "wrong_output", _brief(r)
    assert "float32_matmul_precision" in r["settings_changed"], r["settings_changed"]


def _cli(*args: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, "-m", "kernelsweep", *args], capture_output=True, text=True, timeout=300,
                          env=env)
    try:
        return done, json.loads(done.stdout)
    except json.JSONDecodeError:
        return done, None


def test_eval_and_compile_subcommands(cuda_builds, build_dir):
    done, record = _cli("eval", str(REFERENCES / "vector_add.py"), str(CUDA / "cuda_add.py"), "--device", "cuda",
                        "--timing-trials", "20", "--build-dir", str(build_dir))
    assert done.returncode == 0 and record and record["category"] in SUCCESS, done.stderr[-1500:]
    done, record = _cli("compile", str(CUDA / "cuda_bad_header.py"), "--device", "cuda", "--build-dir", str(build_dir))
    assert done.returncode == 0 and record and record["category"] == "hallucinated_api", done.stderr[-1500:]
