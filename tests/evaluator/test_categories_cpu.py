"""Every category, end to end on the CPU target: real worker processes, real
C++ builds, real signals and timers. Each case is one fixture candidate."""

from __future__ import annotations

from pathlib import Path

import pytest

from evaluator_paths import CPU

from kernelsweep.core.verdict import CATEGORIES, SUCCESS_CATEGORIES

# (reference, candidate, expected category); the C++ cases use the shared library build.
CASES = [
    ("add", "empty", "no_code"),
    ("add", "prose_only", "no_code"),
    ("add", "syntax_error", "syntax_error"),
    ("add", "no_modelnew", "interface_error"),
    ("add", "wrong_init", "interface_error"),
    ("add", "wrong_forward", "interface_error"),
    ("add", "hallucinated_attr", "hallucinated_api"),
    ("add", "hallucinated_module", "hallucinated_api"),
    ("add", "hallucinated_kwarg", "hallucinated_api"),
    ("add", "cpp_bad_header", "hallucinated_api"),
    ("add", "cpp_undeclared", "hallucinated_api"),
    ("add", "cpp_compile_error", "compile_error"),
    ("add", "oom", "out_of_memory"),
    ("add", "cpp_segv", "crash"),
    ("add", "segfault_python", "crash"),
    ("add", "runtime_error", "runtime_error"),
    ("add", "exit_early", "runtime_error"),
    ("add", "shape_mismatch", "shape_mismatch"),
    ("add", "dtype_mismatch", "shape_mismatch"),
    ("pair_out", "pair_swapped", "shape_mismatch"),
    ("add", "wrong_output", "wrong_output"),
    # Consecutive trials never share input addresses: reading the first call's is wrong at the second.
    ("add", "reads_first_input_address", "wrong_output"),
    ("add", "pytorch_only", "no_custom_kernel"),
    ("pair_out", "pair_out", "no_custom_kernel"),
    ("add", "cpp_unused", "no_custom_kernel"),
    ("add", "cpp_fallback", "no_custom_kernel"),
    ("slow_add", "cpp_add", "correct_faster"),
    ("add", "cpp_add_repeat", "correct_slower"),
    ("sleepy_add", "cpp_add_sleepy", "correct_tie"),
]
SPEED_VERDICTS = {"correct_faster", "correct_slower", "correct_tie"}
NOT_CUSTOM_BECAUSE = {"pytorch_only": "defines no", "pair_out": "defines no", "cpp_unused": "did not run them",
                      "cpp_fallback": "ks_bad_header (main.cpp:3: ATen/native/cudnn/utils.h: No such file"}


@pytest.mark.parametrize("reference, candidate, expected", CASES, ids=[c[1] + "-vs-" + c[0] for c in CASES])
def test_category(run_eval, cpu_library, reference, candidate, expected):
    timed = 30 if expected in SPEED_VERDICTS else 10  # a speed verdict from more calls: two cores are shared
    r = run_eval(reference, candidate, timing_trials=timed)
    if expected in SPEED_VERDICTS and r["category"] == "correct_unstable":
        # Other load on the machine spread the timings too far for a speed verdict: said so, never guessed.
        assert "timing_unstable" in r["flags"] and r["timing_verdict"] == "unstable", (r["flags"], r["speedup_ci"])
    else:
        # the trusted clock's windows too: a speed verdict it changed says why
        assert r["category"] == expected, (r["category"], r["error"], r["flags"], (r.get("timing") or {}).get("windows"))
    assert r["category"] in CATEGORIES
    assert r["correct"] == (expected in SUCCESS_CATEGORIES or expected == "no_custom_kernel")
    assert r["custom_kernel"] == (expected in SUCCESS_CATEGORIES)
    if r["correct"]:
        assert r["trials_passed"] == 3 and r["max_abs_diff"] is not None
        assert r["runtime_ms"]["n"] == timed and len(r["ref_runtime_ms"]["samples"]) == timed
        assert r["speedup_ci"][0] <= r["speedup"] <= r["speedup_ci"][1]
        # Timings too spread for a verdict (other load on the machine) leave "faster" open.
        assert r["faster"] == (None if r["timing_verdict"] == "unstable" else r["timing_verdict"] == "faster")
        if r["custom_kernel"]:
            assert r["error"] is None
        else:  # says why: the reader (and the model's feedback) sees a caught build failure, a fallback
            assert r["error"]["type"] == "NoCustomKernel"
            assert NOT_CUSTOM_BECAUSE[candidate] in r["error"]["message"], r["error"]
    else:
        assert r["error"] and r["error"]["message"]
        assert r["speedup"] is None and r["faster"] in (None, False)


def test_build_failures_say_where(run_eval):
    r = run_eval("add", "cpp_bad_header")
    assert r["compiled"] is False
    assert "ATen/native/cudnn/utils.h" in r["error"]["message"]
    assert r["error"]["diagnostics"][0]["missing"] == "ATen/native/cudnn/utils.h"
    r = run_eval("add", "cpp_undeclared")
    assert "'F'" in r["error"]["message"]


def test_kernel_evidence_static_and_launched(run_eval, cpu_library):
    r = run_eval("slow_add", "cpp_add")
    evidence = r["kernel_evidence"]
    assert evidence["static"]["defines_kernel"] and "vec_add" in evidence["static"]["bound_functions"]
    assert evidence["launched"]["launched"]
    assert any(name.endswith(".vec_add") for name in evidence["launched"]["extension_calls"])
    unused = run_eval("add", "cpp_unused")
    assert unused["kernel_evidence"]["static"]["defines_kernel"]
    assert not unused["kernel_evidence"]["launched"]["launched"]


def test_the_compile_steps_build_is_found_cached(run_eval, cpu_library):
    r = run_eval("slow_add", "cpp_add")
    assert r["compiled"] is True
    assert r["builds"] and all(b["cached"] for b in r["builds"])
    assert r["builds"][0]["key"] == cpu_library["builds"][0]["key"]


def test_weights_come_from_the_seed_alone(run_eval):
    """KernelBench's convention: ModelNew is built under the seed Model was
    built under, and nothing is copied into it afterwards."""
    # Other attribute names: equal because both are built under the same seed.
    r = run_eval("linear_relu", "linear_relu_own_init")
    assert r["category"] == "no_custom_kernel" and r["weights"] == {"same": 2, "changed": 0, "absent": 0}, r
    # An extra random draw first: other weights, its own doing.
    r = run_eval("linear_relu", "linear_relu_scaled_init")
    assert r["category"] == "wrong_output" and r["weights"] == {"same": 0, "changed": 2, "absent": 0}, r


def test_half_precision(run_eval, cpu_library):
    r = run_eval("add", "pytorch_only", precision="fp16")
    assert r["category"] == "no_custom_kernel"
    assert r["provenance"]["atol"] == 1e-2 and r["precision"] == "fp16"
    # The C++ kernel reads float32 data only: on fp16 inputs it raises (TORCH_CHECK).
    assert run_eval("add", "cpp_add", precision="fp16")["category"] == "runtime_error"


def test_record_fields_and_provenance(run_eval):
    r = run_eval("add", "pytorch_only", task_sha256="f" * 64)
    for key in ("schema", "category", "compiled", "correct", "custom_kernel", "kernel_evidence", "speedup",
                "speedup_ci", "timing_verdict", "faster", "runtime_ms", "ref_runtime_ms", "max_abs_diff",
                "max_rel_diff", "trials_passed", "error", "flags", "wall_s", "compile_s", "device", "precision",
                "provenance"):
        assert key in r, key
    p = r["provenance"]
    assert p["task_sha256"] == "f" * 64 and len(p["candidate_sha256"]) == 64
    # Secret seeds, drawn per evaluation (one more trial: the perturbed call), recorded afterwards.
    assert len(p["seeds"]["trials"]) == 4 and len(set(p["seeds"]["trials"])) == 4
    assert p["seeds"]["trials"] != run_eval("add", "pytorch_only")["provenance"]["seeds"]["trials"]
    assert p["trials"] == 3 and p["timing_trials"] == 10 and p["confinement"] == "namespaces"
    assert p["torch"] and p["python"] and p["device_name"] and p["harness"]
    assert set(r["runtime_ms"]) >= {"median", "mean", "std", "min", "max", "n", "samples"}


def test_no_room_for_outputs_is_the_harness_not_the_candidate(run_eval, monkeypatch):
    """A disk without room for the candidate's saved outputs stops the
    evaluation as a harness error naming the disk, instead of failing the
    candidate's worker and blaming the candidate."""
    from kernelsweep.evaluator import HarnessError
    from kernelsweep.evaluator.judge import correctness

    monkeypatch.setattr(correctness, "DISK_MARGIN", 1 << 62)
    with pytest.raises(HarnessError, match="no room for the candidate's outputs"):
        run_eval("add", "pytorch_only")


def test_an_extension_loaded_from_a_source_file_is_built_once_and_is_a_custom_kernel(run_eval, build_dir):
    """torch.utils.cpp_extension.load on a file the candidate writes at import
    (a new temporary path each time): the compile step builds it, keyed by the
    file's contents, and the evaluation uses that build instead of compiling
    again (ninja's log shows one compilation); its calls are the candidate's kernel."""
    from kernelsweep.evaluator import compile_candidate

    compiled = compile_candidate(CPU / "cpp_add_from_file.py", device="cpu", build_dir=build_dir, timeout_s=1200,
                                 build_sharing="content")
    assert compiled["compiled"] is True, compiled
    r = run_eval("add", "cpp_add_from_file", timing_trials=10)
    assert r["category"] in SUCCESS_CATEGORIES and r["custom_kernel"], (r["category"], r["error"], r["flags"])
    (build,) = [b for b in r["builds"] if b["name"] == "ks_fixture_from_file"]
    assert build["ok"] and build["cached"] and build["key"] == compiled["builds"][0]["key"], r["builds"]
    (log,) = Path(build_dir).glob(f"**/ext/{build['key'][:24]}/.ninja_log")
    compiled = [line for line in log.read_text().splitlines() if line.split("\t")[3:4] == ["vec_add.o"]]
    assert len(compiled) == 1, log.read_text()
    assert any(name.endswith(".vec_add") for name in r["kernel_evidence"]["launched"]["extension_calls"])
