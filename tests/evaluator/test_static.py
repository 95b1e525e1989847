"""Parts that judge without running a candidate: source analysis, compiler
diagnostics (from the real compilers), output comparison and exception
classification (from real exceptions)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch

from evaluator_paths import CPU, shared_dir

from kernelsweep.evaluator import classify, compare, diagnostics, source
from kernelsweep.evaluator.untrusted import failures


# --------------------------------------------------------------- source ---
def test_empty_and_docstring_only_are_no_code():
    assert source.analyze("").no_code
    assert source.analyze("  \n\n").no_code
    assert source.analyze('"""Only prose here."""\n').no_code
    assert not source.analyze("x = 1\n").no_code


def test_syntax_error_reports_line():
    info = source.analyze((CPU / "syntax_error.py").read_text())
    assert info.syntax_error and info.syntax_error["line"] == 5


def test_static_evidence_of_cuda_and_triton_kernels():
    text = '''
import triton
import triton.language as tl
from torch.utils.cpp_extension import load_inline
cuda_src = """
__global__ void fused_relu_kernel(const float* x, float* y, int n) { }
template <typename T> __global__ void __launch_bounds__(256) scale_kernel(T* x) { }
"""
ext = load_inline(name="e", cpp_sources="torch::Tensor run(torch::Tensor x);", cuda_sources=cuda_src,
                  functions=["run"])

@triton.jit
def add_kernel(x_ptr, n, BLOCK: tl.constexpr):
    pass

class ModelNew: pass
'''
    info = source.analyze(text)
    ev = info.evidence
    assert ev["cuda_kernels"] == ["fused_relu_kernel", "scale_kernel"]
    assert ev["triton_kernels"] == ["add_kernel"]
    assert ev["bound_functions"] == ["run"]
    assert source.defines_kernel(ev, "cuda")
    assert info.names_model_new


NUMBA_CUDA = '''
from numba import cuda
import numba

@cuda.jit
def add_kernel(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]

@numba.cuda.jit("void(float32[:])", fastmath=False)
def scale_kernel(x):
    pass

@cuda.jit(device=True)
def helper(x):  # a device function: called from kernels, never launched
    return x

class ModelNew: pass
'''
# The entry name numba-cuda 0.30.4 gave add_kernel above (cuda.compile_ptx, module __main__),
# and its demangled form (c++filt): how a profiler may list the launch.
NUMBA_MANGLED = ("_ZN8__main__10add_kernelB2v1B92cw51cXTLSUwv1sDUaKthqaNgoKmjgOR3W3CwAkMXLaJtQYkOIgxJU0gCqOkEJoHkbttqdV"
                 "hoqlspQGNFHSgJ5BnXagIAE5ArrayIfLi1E1C7mutable7alignedE5ArrayIfLi1E1C7mutable7alignedE5ArrayIfLi1E1C7"
                 "mutable7alignedE")
NUMBA_DEMANGLED = ("__main__::add_kernel[abi:v1][abi:cw51cXTLSUwv1sDUaKthqaNgoKmjgOR3W3CwAkMXLaJtQYkOIgxJU0gCqOkEJoHkbt"
                   "tqdVhoqlspQGNFHSgJ5BnXagIA](Array<float, 1, C, mutable, aligned>, Array<float, 1, C, mutable, "
                   "aligned>, Array<float, 1, C, mutable, aligned>)")


def test_static_evidence_of_numba_cuda_kernels():
    ev = source.analyze(NUMBA_CUDA).evidence
    assert ev["numba_kernels"] == ["add_kernel", "scale_kernel"] and ev["triton_kernels"] == []
    assert source.defines_kernel(ev, "cuda") and not source.defines_kernel(ev, "cpu")
    assert {"add_kernel", "scale_kernel"} <= set(source.kernel_names(ev, "cuda"))


def test_a_launch_is_the_candidates_by_its_kernel_name_mangled_or_not():
    from kernelsweep.evaluator.untrusted import kernels

    launched = [NUMBA_MANGLED, NUMBA_DEMANGLED, "void fused_relu_kernel<float>(float const*, float*, int)",
                "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>(int)",
                "_ZN2at6native3addEv",  # a mangled name without Numba's ABI tag
                "_ZN4Ops210add_kernelB2v1E"]  # a part ending in a digit before the name
    assert kernels.candidates_kernels(launched, ["add_kernel"]) == sorted([NUMBA_MANGLED, NUMBA_DEMANGLED,
                                                                          launched[-1]])
    assert kernels.numba_entry_names(NUMBA_MANGLED) == {"add_kernel"}
    assert kernels.candidates_kernels(launched, ["fused_relu_kernel"]) == [launched[2]]
    # a name's part or a longer name is not the name: "add" is neither `add_kernel` nor `10add_kernel`
    assert kernels.candidates_kernels(launched, ["add", "kernel", "relu_kernel"]) == []


def test_cpu_kernel_needs_an_extension_with_a_function():
    library = source.analyze((CPU / "cpp_add.py").read_text())
    assert source.defines_kernel(library.evidence, "cpu")
    assert "vec_add" in source.kernel_names(library.evidence, "cpu")
    plain = source.analyze((CPU / "pytorch_only.py").read_text())
    assert not source.defines_kernel(plain.evidence, "cpu")
    assert not source.defines_kernel(library.evidence, "cuda")  # C++ on the host is no CUDA kernel


def test_replayed_model_outputs_define_no_kernels():
    """The published generations hold no __global__ kernel (their README says so);
    the static analysis must agree on every one of them, and never crash."""
    folder = shared_dir() / "replay" / "kernelbench-agentic"
    if not folder.is_dir():
        pytest.skip(f"shared replay data not found at {folder} (set KERNELSWEEP_SHARED)")
    rows = [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines() if line]
    assert len(rows) == 150
    for row in rows:
        info = source.analyze(row["extracted_code"] or "")
        assert not source.defines_kernel(info.evidence, "cuda"), row["task"]
        assert not info.no_code


# ---------------------------------------------------------- diagnostics ---
def _compile_error(code: str, suffix: str, compiler: list[str], tmp_path) -> str:
    path = tmp_path / f"probe{suffix}"
    path.write_text(code)
    out = subprocess.run(compiler + [str(path)], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode != 0
    return out.stdout + out.stderr


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
@pytest.mark.parametrize("code, missing", [
    ("#include <ATen/native/cudnn/utils.h>\n", "ATen/native/cudnn/utils.h"),
    ("int f() { return F(1); }\n", "F"),
    ("namespace at {}\nint f() { return at::fast_relu(1); }\n", "fast_relu"),
    ("struct T { int x; };\nint f(T t) { return t.data; }\n", "data"),
])
def test_gcc_missing_names_are_hallucinations(tmp_path, code, missing):
    diags = diagnostics.parse(_compile_error(code, ".cpp", ["g++", "-fsyntax-only"], tmp_path))
    assert diags and diags[0].missing == missing


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_gcc_type_error_is_a_plain_compile_error(tmp_path):
    diags = diagnostics.parse(_compile_error("int f(const float* p) { int i = p; return i; }\n", ".cpp",
                                             ["g++", "-fsyntax-only"], tmp_path))
    assert diags and all(d.missing is None for d in diags)
    record = {"kind": "compile", "name": "x", "output": "\n".join(f"{d.file}:{d.line}:1: error: {d.message}" for d in diags)}
    assert classify.classify_build(record).category == "compile_error"


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_nvcc_front_end_diagnostics(tmp_path):
    out = _compile_error("__global__ void k(float* x) { x[0] = undefined_thing; }\n"
                         "#include <cuda/not_a_header.h>\n", ".cu", ["nvcc", "-c", "-o", "k.o"], tmp_path)
    diags = diagnostics.parse(out)
    assert diags, out
    assert diags[0].missing in ("undefined_thing", "cuda/not_a_header.h")


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_linker_symbols_split_library_from_own(tmp_path):
    library = _compile_error("namespace at { int fast_gelu(int); }\nint main() { return at::fast_gelu(1); }\n",
                             ".cpp", ["g++", "-o", "a.out"], tmp_path)
    assert diagnostics.parse(library)[0].missing.startswith("at::fast_gelu")
    own = _compile_error("int launch_my_kernel(int);\nint main() { return launch_my_kernel(1); }\n",
                         ".cpp", ["g++", "-o", "a.out"], tmp_path)
    diags = diagnostics.parse(own)
    assert diags and diags[0].missing is None


# -------------------------------------------------------------- compare ---
def _out(*leaves, structure=None):
    return {"structure": structure or ("T" if len(leaves) == 1 else f"tuple[{','.join('T' for _ in leaves)}]"),
            "leaves": list(leaves)}


def _widened_magnitude(x: torch.Tensor) -> float:
    """max_magnitude's meaning, computed the plain way: the whole tensor widened to float64."""
    w = (x.to(torch.complex128) if x.is_complex() else x.to(torch.float64)).abs()
    w = w[torch.isfinite(w)]
    return float(w.max()) if w.numel() else 0.0


def test_max_magnitude_in_chunks_equals_the_widened_whole_tensor():
    span = compare.CHUNK * 2 + 3  # three chunks, the last one short
    big = torch.randn(span) * 1e3
    big[compare.CHUNK + 1] = -7e5  # the largest sits in the second chunk
    big[5], big[-1] = float("nan"), float("inf")  # non-finite values never count
    cases = [big, big.to(torch.float16), big.to(torch.bfloat16), big[:-3].reshape(2, -1)[:, ::2],  # not contiguous
             torch.tensor([torch.iinfo(torch.int64).min, 3]),  # abs overflows in int64
             torch.tensor([-128, 5], dtype=torch.int8), torch.tensor([3 - 4j, float("nan")]),
             torch.full((4,), float("nan"))]
    for x in cases:
        assert compare.max_magnitude(_out(x)) == _widened_magnitude(x), x.dtype
    assert compare.max_magnitude(_out(torch.ones(3, dtype=torch.bool), torch.empty(0), -2.5)) == 2.5
    assert compare.distinguishing_tolerance([0.5, 2.0], 1e-2) == 5e-4
    assert compare.distinguishing_tolerance([0.0], 1e-2) == 1e-2


def test_compare_tolerance_rule():
    r = torch.tensor([1.0, 100.0, 0.0])
    ok = compare.compare_outputs(_out(r), _out(r + torch.tensor([1e-4, 1e-2, 1e-4])), 1e-4, 1e-4)
    assert ok["ok"] and ok["max_abs_diff"] == pytest.approx(1e-2, rel=1e-3)
    bad = compare.compare_outputs(_out(r), _out(r + torch.tensor([3e-4, 0.0, 0.0])), 1e-4, 1e-4)
    assert not bad["ok"] and bad["kind"] == "values"


def test_compare_shape_dtype_structure_nonfinite():
    r = torch.zeros(2, 3)
    assert compare.compare_outputs(_out(r), _out(torch.zeros(3, 2)), 1e-4, 1e-4)["kind"] == "shape"
    assert compare.compare_outputs(_out(r), _out(r.double()), 1e-4, 1e-4)["kind"] == "dtype"
    assert compare.compare_outputs(_out(r), _out(r, r), 1e-4, 1e-4)["kind"] == "structure"
    nan = r.clone()
    nan[0, 0] = float("nan")
    assert compare.compare_outputs(_out(r), _out(nan), 1e-4, 1e-4)["kind"] == "nonfinite"
    assert compare.compare_outputs(_out(nan), _out(nan.clone()), 1e-4, 1e-4)["ok"]


def test_compare_over_several_chunks(monkeypatch):
    """Chunked comparison counts and locates across chunk borders as one pass would."""
    monkeypatch.setattr(compare, "CHUNK", 4)
    r = torch.arange(1.0, 11.0)
    c = r.clone()
    c[1] += 1e-3
    c[9] += 1e-2  # one bad element in the first chunk, one in the last (short) one
    bad = compare.compare_outputs(_out(r), _out(c), 1e-4, 1e-4)
    assert bad["kind"] == "values" and bad["message"].startswith("2 of 10 elements")
    assert bad["max_abs_diff"] == pytest.approx(1e-2, rel=1e-3)
    inf_r, inf_c = r.clone(), r.clone()
    inf_r[6] = inf_c[6] = float("inf")
    assert compare.compare_outputs(_out(inf_r), _out(inf_c), 1e-4, 1e-4)["ok"]
    inf_c[6] = float("-inf")
    assert compare.compare_outputs(_out(inf_r), _out(inf_c), 1e-4, 1e-4)["kind"] == "nonfinite"
    nan_c = r.clone()
    nan_c[[2, 7]] = float("nan")
    moved = compare.compare_outputs(_out(r), _out(nan_c), 1e-4, 1e-4)
    assert moved["kind"] == "nonfinite" and moved["message"].startswith("2 elements")


def test_sampled_timed_output(monkeypatch):
    """Both workers keep the same secret positions of a big tensor; a wrong
    element is found there, a wrong shape fails whole; small tensors stay whole."""
    from kernelsweep.evaluator.untrusted import trees

    monkeypatch.setattr(trees, "SAMPLED_ELEMENTS", 64)
    ref = torch.randn(32, 32)
    small = torch.randn(8)
    a = trees.sampled_output(*trees.flatten_output((ref, small)), 7)
    b = trees.sampled_output(*trees.flatten_output((ref.clone(), small.clone())), 7)
    assert a["leaves"][0].shape == (64,) and torch.equal(a["leaves"][1], small)
    assert compare.compare_outputs(a, b, 1e-4, 1e-4)["ok"]
    assert not torch.equal(a["leaves"][0], trees.sampled_output(*trees.flatten_output((ref, small)), 8)["leaves"][0])
    zeros = trees.sampled_output(*trees.flatten_output((torch.zeros(32, 32), small)), 7)
    assert compare.compare_outputs(a, zeros, 1e-4, 1e-4)["kind"] == "values"
    reshaped = trees.sampled_output(*trees.flatten_output((ref.reshape(16, 64), small)), 7)
    assert compare.compare_outputs(a, reshaped, 1e-4, 1e-4)["kind"] == "structure"


def test_identical_outputs_is_bitwise():
    a = torch.randn(5)
    assert compare.identical_outputs(_out(a), _out(a.clone()))
    assert not compare.identical_outputs(_out(a), _out(a + 1e-7))


# ------------------------------------------------------------- classify ---
def _described(fn, **kw) -> dict:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        return failures.describe_exception(exc, "trials", **kw)
    raise AssertionError("no exception")


def test_real_exceptions_map_to_categories():
    import torch.utils.cpp_extension as cpp

    cases = [
        (lambda: torch.fused_add_fast(1), "hallucinated_api"),
        (lambda: __import__("flash_elementwise_kernels"), "hallucinated_api"),
        (lambda: cpp.load_inline(name="x", sources=["int f();"]), "hallucinated_api"),
        (lambda: torch.empty(1 << 50, dtype=torch.uint8), "out_of_memory"),
        (lambda: [].pop(), "runtime_error"),
        (lambda: None.shape, "runtime_error"),  # an attribute of None is the candidate's bug, not an API
        (lambda: exec("def broken(:\n  pass"), "syntax_error"),
    ]
    for fn, expected in cases:
        info = _described(fn)
        assert classify.classify_exception(info).category == expected, info["message"]


def test_a_name_a_library_reaches_for_is_not_the_candidates_hallucination(tmp_path, monkeypatch):
    """An attribute or module missing where a library's own line reaches for it
    (numba 0.68 asking NumPy 2.5 for `row_stack`, seen on a GPU machine's
    image) is that environment failing, a runtime_error; the candidate's own
    line naming what does not exist, even through a module's __getattr__
    (torch's), stays hallucinated_api."""
    import importlib.util

    (tmp_path / "vendored_lib.py").write_text(
        "import math\n\ndef compile_kernel():\n    return math.row_stack\n\n"
        "def load_backend():\n    import backend_bindings_that_are_not_installed\n")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(
        "import math\nimport torch\nimport vendored_lib\n\n"
        "def through_library():\n    return vendored_lib.compile_kernel()\n\n"
        "def library_import():\n    return vendored_lib.load_backend()\n\n"
        "def own_attribute():\n    return math.fused_sqrt\n\n"
        "def own_torch_attribute():\n    return torch.fused_add_fast\n\n"
        "def own_import():\n    import flash_elementwise_kernels\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    spec = importlib.util.spec_from_file_location("kernelsweep_candidate_probe", candidate)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    expected = {"through_library": "runtime_error", "library_import": "runtime_error",
                "own_attribute": "hallucinated_api", "own_torch_attribute": "hallucinated_api",
                "own_import": "hallucinated_api"}
    for name, category in expected.items():
        info = _described(getattr(module, name), candidate_file=str(candidate))
        assert classify.classify_exception(info).category == category, (name, info.get("raised_in_library"))


def test_unexpected_keyword_on_own_function_is_not_a_hallucination():
    def own(a):
        return a

    info = _described(lambda: own(a=1, b=2), candidate_names=frozenset({"own"}))
    assert classify.classify_exception(info).category == "runtime_error"


def test_cuda_error_codes_from_messages():
    class FakeAccel(RuntimeError):
        pass

    assert failures.cuda_error_name(FakeAccel("CUDA error: an illegal memory access was encountered\n"
                                             "Search for `cudaErrorIllegalAddress' in ...")) == "cudaErrorIllegalAddress"
    assert failures.cuda_error_name(FakeAccel("CUDA error: misaligned address")) == "cudaErrorMisalignedAddress"
    info = {"type": "torch.AcceleratorError", "mro": ["torch.AcceleratorError", "RuntimeError"],
            "message": "CUDA error: an illegal memory access", "cuda_error": "cudaErrorIllegalAddress"}
    assert classify.classify_exception(info).category == "crash"
