"""The CUDA twin of test_precision_cpu.py: the reference and the inputs cast to
fp16 and bf16 on the GPU, a kernel templated on the dtype is correct at both,
and the float-only fixture kernel raises (the dtype rule itself is the
device-independent comparison, tested on the CPU). Skipped without a GPU; on the lent machines:
`python -m pytest -q tests/evaluator/test_precision_cuda.py`."""

from __future__ import annotations

import pytest
import torch
from evaluator_paths import CUDA, REFERENCES

from kernelsweep.evaluator.settings import TOLERANCES
from kernelsweep.core.verdict import SUCCESS_CATEGORIES

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def run(candidate, precision, build_dir, tmp_path):
    from kernelsweep.evaluator import evaluate

    return evaluate(REFERENCES / "vector_add.py", candidate, device="cuda", precision=precision, trials=3,
                    timing_trials=20, warmup=3, timeout_s=120.0, build_dir=build_dir, log_dir=tmp_path / "logs")


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_precisions_below_fp32_on_the_gpu(precision, build_dir, tmp_path):
    r = run(CUDA / "cuda_add_any_dtype.py", precision, build_dir, tmp_path)
    assert r["precision"] == precision and (r["provenance"]["atol"], r["provenance"]["rtol"]) == TOLERANCES[precision]
    assert r["category"] in SUCCESS_CATEGORIES and r["custom_kernel"], (r["category"], r["error"])
    # reads float* only: data_ptr<float>() raises on half and bfloat16 tensors
    assert run(CUDA / "cuda_add.py", precision, build_dir, tmp_path)["category"] == "runtime_error"
