"""The CUDA twin of test_baseline_pairing.py: every baseline mode timed on the GPU,
each but cudnn-benchmark beside eager, and CUDA-graph replay running the graph of
the input set it is given. Skipped without a GPU; on the lent machines:
`python -m pytest -q tests/evaluator/test_baseline_cuda.py` (scripts/gpu_eval_suite.sh
baseline checks the same record through the CLI)."""

from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from evaluator_paths import REFERENCES

from kernelsweep.evaluator import settings

pytestmark = [pytest.mark.cuda, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]

# max-autotune left out: minutes of autotuning, and nothing of it is new here
MODES = [m for m in settings.BASELINE_MODES if m != "inductor-max-autotune"]
CONV = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(16, 32, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(8, 16, 32, 32)]


def get_init_inputs():
    return []
"""


class Summing(nn.Module):
    """Adds the sum of its input to a buffer: what a replay read shows in the buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros((), dtype=torch.float64))

    def forward(self, x):
        self.total += x.sum(dtype=torch.float64)
        return x * 2


def test_each_graph_reads_its_own_input_set():
    from kernelsweep.evaluator.untrusted.baseline import _graphed

    device = torch.device("cuda")
    model = Summing().to(device)
    pool = [[torch.randn(1024, device=device)] for _ in range(3)]
    with torch.no_grad():
        replay = _graphed(model, pool, device)
        model.total.zero_()  # the warm-up calls ran; captures ran nothing
        replay(*pool[1])
        torch.cuda.synchronize()
        assert model.total.item() == pytest.approx(pool[1][0].double().sum().item())
        replay(*pool[2])
        replay(*pool[1])
        torch.cuda.synchronize()
    expected = 2 * pool[1][0].double().sum().item() + pool[2][0].double().sum().item()
    assert model.total.item() == pytest.approx(expected)


@pytest.mark.parametrize("reference", ["vector_add.py", "conv"])
def test_every_mode_on_the_gpu(reference, tmp_path):
    from kernelsweep.evaluator.baseline import run_baseline

    path = REFERENCES / reference
    if reference == "conv":
        path = tmp_path / "conv_relu.py"
        path.write_text(CONV)
    r = run_baseline(path, device="cuda", modes=MODES, timing_trials=30, warmup=3, timeout_s=300.0,
                     log_dir=tmp_path / "logs")
    modes = r["modes"]
    assert [m["status"] for m in modes.values()] == ["ok"] * len(MODES), \
        {k: (m["status"], m.get("error")) for k, m in modes.items()}
    for mode, entry in modes.items():
        if mode == "eager":
            continue
        paired = mode not in settings.UNPAIRED_MODES
        assert (entry["paired_eager_ms"] is not None) == paired and entry["vs_eager"]["paired"] == paired, mode
        lo, hi = entry["vs_eager"]["speedup_ci"]
        assert lo <= entry["vs_eager"]["speedup"] <= hi, (mode, entry["vs_eager"])
    # A graph replay does the forward's work: not orders of magnitude faster than eager beside it.
    assert 0.2 < modes["cuda-graph"]["vs_eager"]["speedup"] < 20, modes["cuda-graph"]["vs_eager"]
