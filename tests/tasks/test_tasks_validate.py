"""Reference validation in a child process: every way a reference can be
broken is reported with the task id and a reason, never a traceback."""

from __future__ import annotations

import json
import os
import time

import pytest

from tasks_helpers import reference, run_cli
from kernelsweep.tasks import TaskInvalidError, materialize, validate_reference

HEADER = "import torch\nimport torch.nn as nn\n"
INPUTS = "\ndef get_inputs():\n    return [torch.randn(4, 4)]\n\ndef get_init_inputs():\n    return []\n"
IDENTITY = "\nclass Model(nn.Module):\n    def forward(self, x):\n        return x\n"


def invalid_reason(code: str, **kw) -> str:
    with pytest.raises(TaskInvalidError) as info:
        validate_reference(code, "L9-042", **kw)
    assert info.value.task_id == "L9-042"
    assert str(info.value).startswith("L9-042: invalid reference: ")
    return info.value.reason


def test_valid_reference_runs_forward():
    record = validate_reference(reference(3), "L9-001")
    assert record["forward"] == "ran" and record["device"] == "cpu"
    assert record["output_shapes"] == [[8, 8]]
    assert record["input_numel"] == 64 and record["param_numel"] == 0
    assert record["forward_ms"] > 0 and record["warnings"] == []


def test_missing_model():
    assert invalid_reason(HEADER + INPUTS).startswith("missing Model")
    assert invalid_reason(HEADER + IDENTITY) == (
        "missing get_inputs, get_init_inputs (a KernelBench reference defines Model, get_inputs and get_init_inputs)"
    )
    assert "not a torch.nn.Module subclass" in invalid_reason(HEADER + "\nclass Model:\n    pass\n" + INPUTS)


def test_import_errors():
    reason = invalid_reason("import torch\nimport kernelsweep_no_such_module\n" + IDENTITY + INPUTS)
    assert reason.startswith("import failed: ModuleNotFoundError: No module named 'kernelsweep_no_such_module'")
    assert "(line 2 of the reference)" in reason
    assert invalid_reason(HEADER + "def broken(:\n").startswith("import failed: SyntaxError")
    assert invalid_reason(HEADER + "raise SystemExit(3)\n").startswith("import failed: SystemExit")


def test_forward_raising_names_the_line():
    code = HEADER + "\nclass Model(nn.Module):\n    def forward(self, x):\n        return x @ torch.randn(5, 5)\n" + INPUTS
    reason = invalid_reason(code)
    assert reason.startswith("forward raised RuntimeError:") and "(line 6 of the reference)" in reason


def test_inputs_and_construction_raising():
    bad_inputs = HEADER + IDENTITY + "\ndef get_inputs():\n    raise ValueError('no data')\n\ndef get_init_inputs():\n    return []\n"
    assert invalid_reason(bad_inputs) == "get_inputs() raised ValueError: no data (line 9 of the reference)"
    bad_init = HEADER + IDENTITY + "\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return 3\n"
    assert invalid_reason(bad_init) == "get_init_inputs() must return a list, got int"
    needs_arg = HEADER + "\nclass Model(nn.Module):\n    def __init__(self, k):\n        super().__init__()\n" \
        "    def forward(self, x):\n        return x\n" + INPUTS
    assert invalid_reason(needs_arg).startswith("Model(*get_init_inputs()) raised TypeError")
    no_tensor = HEADER + "\nclass Model(nn.Module):\n    def forward(self, x):\n        return 3\n" + INPUTS
    assert invalid_reason(no_tensor) == "forward returned no tensor (got int)"


def test_large_inputs_skip_the_cpu_forward_without_allocating():
    # 2**34 float32 elements (64 GiB): sized on the meta device, never allocated.
    code = HEADER + IDENTITY + "\nN = 1 << 17\n\ndef get_inputs():\n    return [torch.rand(N, N)]\n\ndef get_init_inputs():\n    return []\n"
    record = validate_reference(code, "L9-002")
    assert record["forward"] == "skipped" and record["input_numel"] == 1 << 34
    assert "17,179,869,184 elements, above the CPU bound 16,777,216" in record["skip_reason"]
    # A broken forward behind a big input is still caught once the bound allows it.
    small = validate_reference(reference(2), "L9-003", max_numel=10)
    assert small["forward"] == "skipped"
    assert validate_reference(reference(2), "L9-003", forward="never")["skip_reason"] == "forward check disabled"


def test_inputs_that_cannot_run_on_meta_are_built_under_the_memory_cap():
    # .item() fails on the meta device: the child builds the inputs for real.
    small = HEADER + IDENTITY + "\ndef get_inputs():\n    n = int(torch.randint(2, 4, ()).item())\n    return [torch.randn(n)]\n" \
        "\ndef get_init_inputs():\n    return []\n"
    record = validate_reference(small, "L9-004")
    assert record["forward"] == "ran" and record["input_numel"] in (2, 3)
    # The same, 64 GiB large: the address-space cap stops it early.
    huge = HEADER + IDENTITY + "\ndef get_inputs():\n    n = int(torch.tensor(1 << 17).item())\n    return [torch.rand(n, n)]\n" \
        "\ndef get_init_inputs():\n    return []\n"
    record = validate_reference(huge, "L9-004")
    assert record["forward"] == "skipped" and record["input_numel"] is None
    assert record["skip_reason"] == "get_inputs() needs more than 4096 MiB on the CPU (the auto-mode memory cap)"


def test_a_huge_intermediate_skips_the_cpu_forward():
    # Small inputs, a 64 GiB intermediate: the input bound cannot see it, the cap does.
    code = HEADER + "\nclass Model(nn.Module):\n    def forward(self, x):\n" \
        "        return x + torch.zeros(1 << 17, 1 << 17).sum()\n" + INPUTS
    record = validate_reference(code, "L9-008", cpu_memory_mb=1024)
    assert record["forward"] == "skipped" and record["input_numel"] == 16
    assert record["skip_reason"] == "forward needs more than 1024 MiB on the CPU (the auto-mode memory cap)"


def test_hang_at_import_times_out():
    start = time.monotonic()
    reason = invalid_reason(HEADER + "while True:\n    pass\n", timeout_s=8)
    assert reason == "timed out after 8 s during import of the reference"
    assert time.monotonic() - start < 30


def test_slow_forward_is_skipped_in_auto_mode_but_invalid_when_forced():
    code = HEADER + "import time\n\nclass Model(nn.Module):\n    def forward(self, x):\n        time.sleep(600)\n        return x\n" + INPUTS
    record = validate_reference(code, "L9-005", timeout_s=8)
    assert record["forward"] == "skipped" and record["skip_reason"] == "forward did not finish within 8 s on cpu"
    assert invalid_reason(code, timeout_s=8, forward="always") == "timed out after 8 s during forward"


def test_timeout_kills_what_the_reference_spawned(tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    code = HEADER + "import subprocess, sys\n" \
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n" \
        f"open({str(pid_file)!r}, 'w').write(str(p.pid))\n" \
        "while True:\n    pass\n"
    invalid_reason(code, timeout_s=8)
    pid = int(pid_file.read_text())
    for _ in range(50):  # killed by the group kill; give the kernel a moment to reap it
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        if open(f"/proc/{pid}/stat").read().split()[2] == "Z":
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"grandchild {pid} survived the timeout")


def test_crash_is_reported_with_the_signal():
    code = HEADER + "import os\n\nclass Model(nn.Module):\n    def forward(self, x):\n        os.abort()\n" + INPUTS
    reason = invalid_reason(code)
    assert reason.startswith("the check process died during forward (it was killed by SIGABRT)")


def test_non_finite_output_is_a_warning():
    code = HEADER + "\nclass Model(nn.Module):\n    def forward(self, x):\n        return x / 0.0\n" + INPUTS
    assert validate_reference(code, "L9-006")["warnings"] == ["output holds NaN or Inf"]


def test_cuda_without_a_gpu_is_an_environment_error_not_an_invalid_task():
    import torch
    from kernelsweep.tasks import TaskConfigError

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(TaskConfigError, match="device cuda requested but torch sees no CUDA device"):
        validate_reference(reference(2), "L9-007", device="cuda")


@pytest.fixture
def checkout(tmp_path):
    level = tmp_path / "kb" / "level1"
    level.mkdir(parents=True)
    (level / "1_Good.py").write_text(reference(2))
    (level / "2_No_Model.py").write_text(HEADER + INPUTS)
    (level / "3_Bad_Forward.py").write_text(
        HEADER + "\nclass Model(nn.Module):\n    def forward(self, x):\n        return x.view(3, -1)\n" + INPUTS)
    return tmp_path / "kb"


def test_materialize_reports_invalid_task_and_writes_nothing(checkout, tmp_path):
    selection = {"source": "local", "path": str(checkout), "levels": [1]}
    out = tmp_path / "L1-002.json"
    with pytest.raises(TaskInvalidError, match=r"^L1-002: invalid reference: missing Model"):
        materialize(selection, "L1-002", out)
    assert not out.exists()
    record = materialize(selection, "L1-001", tmp_path / "L1-001.json")
    assert json.loads((tmp_path / "L1-001.json").read_text()) == record


def test_cli_validate_lists_each_task(checkout):
    proc = run_cli("validate", "--source", "local", "--path", str(checkout), "--jobs", "2")
    assert proc.returncode == 1
    lines = dict(line.split("\t", 1) for line in proc.stdout.strip().splitlines())
    assert lines["L1-001"].startswith("ok\tforward ran on cpu")
    assert lines["L1-002"].startswith("INVALID\tmissing Model")
    assert lines["L1-003"].startswith("INVALID\tforward raised RuntimeError")
    assert "1 valid, 2 invalid" in proc.stderr
    proc = run_cli("write", "--source", "local", "--path", str(checkout), "--task", "L1-003", "--out", "/dev/null")
    assert proc.returncode == 1 and proc.stderr.startswith("error: L1-003: invalid reference: forward raised")
    assert "Traceback" not in proc.stderr
    proc = run_cli("validate", "--file", str(checkout / "level1" / "1_Good.py"))
    assert proc.returncode == 0 and "\tok\t" in proc.stdout


def test_a_task_zeros_would_pass_is_flagged_at_validation():
    """Issue 15, family 8: a softmax over 4,000,000 values (each below the
    fp32 atol) is flagged; an ordinary task is not. The child's threshold is the
    evaluator's fp32 atol."""
    from kernelsweep.evaluator.settings import TOLERANCES
    from kernelsweep.tasks.check_child import DEGENERATE_ATOL

    assert DEGENERATE_ATOL == TOLERANCES["fp32"][0]
    softmax = HEADER + ("\nclass Model(nn.Module):\n    def forward(self, x):\n        return torch.softmax(x, dim=1)\n"
                        "\ndef get_inputs():\n    return [torch.randn(1, 4000000)]\n\ndef get_init_inputs():\n    return []\n")
    flagged = validate_reference(softmax, "L9-002")["warnings"]
    assert any(w.startswith("degenerate tolerance") for w in flagged), flagged
    assert validate_reference(reference(3), "L9-001")["warnings"] == []


def _model(forward: str, inputs: str = "torch.randn(8, 64)", init: str = "") -> str:
    return (HEADER + f"\nclass Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n{init}"
            f"\n    def forward(self, x):\n        return {forward}\n"
            f"\ndef get_inputs():\n    return [{inputs}]\n\ndef get_init_inputs():\n    return []\n")


BIASED = "        self.lin = nn.Linear(64, 64)\n"


@pytest.mark.parametrize("forward, init, why", [
    ("self.lin(x) * 0 + self.lin.bias", BIASED, "the outputs are the same within atol=0.0001"),
    ("torch.relu(x - 100.0)", "", "every output is zero"),  # a large negative shift before a ReLU
])
def test_a_task_whose_outputs_do_not_depend_on_its_inputs_is_degenerate(forward, init, why):
    """Issue 36: the reference runs at its default init on more input draws; a
    constant answer (a bias alone, a ReLU that is always zero) marks the task
    degenerate, with the reason, in the validation record."""
    record = validate_reference(_model(forward, init=init), "L9-050")
    assert record["degenerate"] is True, record
    assert record["degenerate_reason"].startswith("the outputs do not depend on the inputs: at the default init, "
                                                  "on 3 input draws ") and why in record["degenerate_reason"]


@pytest.mark.parametrize("forward, init", [
    ("x * 1e-7", ""),                                  # every output within atol of zero, yet input-dependent
    ("self.lin(x) * 1e-3 + self.lin.bias", BIASED),   # a bias plus a small input-dependent part
    ("torch.relu(x - 2.5)", ""),                       # mostly zero, a few inputs cross the shift
])
def test_a_small_but_input_dependent_output_is_not_degenerate(forward, init):
    """The look-alikes: outputs that are small, or mostly constant, but follow
    the inputs are judged with the tolerance the evaluator uses and pass."""
    record = validate_reference(_model(forward, init=init), "L9-051")
    assert record["degenerate"] is False and record["degenerate_reason"] is None, record


def test_the_evaluators_constant_task_is_degenerate_at_validation():
    """The task the evaluator judges `indistinguishable` (tests/evaluator:
    softmax over a dimension of size one) is the task validation marks; the
    degenerate-tolerance one (a wide softmax, input-dependent) is not."""
    references = os.path.join(os.path.dirname(__file__), "..", "evaluator", "fixtures", "references")
    read = lambda name: open(os.path.join(references, f"{name}.py"), encoding="utf-8").read()  # noqa: E731
    assert validate_reference(read("softmax_singleton"), "L9-052")["degenerate"] is True
    wide = validate_reference(read("softmax_wide"), "L9-053")
    assert wide["degenerate"] is False and any(w.startswith("degenerate tolerance") for w in wide["warnings"])


def test_degeneracy_is_unknown_when_the_forward_is_skipped():
    record = validate_reference(_model("x * 0"), "L9-054", forward="never")
    assert record["forward"] == "skipped" and record["degenerate"] is None and record["degenerate_reason"] is None


def test_cli_validate_names_a_degenerate_task(tmp_path):
    path = tmp_path / "constant.py"
    path.write_text(_model("x * 0 + 1"))
    proc = run_cli("validate", "--file", str(path))
    assert proc.returncode == 0 and "DEGENERATE: the outputs do not depend on the inputs" in proc.stdout


def test_a_reference_too_slow_for_the_extra_draws_stays_valid():
    """The forward ran (and was timed); only the extra input draws ran out of
    time: the task is valid and its degeneracy is reported as not checked."""
    slow_later = HEADER + ("import time\n\nclass Model(nn.Module):\n    calls = 0\n\n    def forward(self, x):\n"
                           "        Model.calls += 1\n        if Model.calls > 6:  # after the timed calls\n"
                           "            time.sleep(600)\n        return x\n" + INPUTS)
    record = validate_reference(slow_later, "L9-055", timeout_s=15)  # the child always runs to this limit
    assert record["forward"] == "ran" and record["degenerate"] is None, record
    assert record["degenerate_reason"].startswith("not checked: the forward on more input draws"), record


@pytest.mark.slow
def test_a_kernelbench_network_degenerate_at_its_default_init(kernelbench):
    """KernelBench L3-003 (DeepNarrowMLP: 16 ReLU layers of 1024 at PyTorch's
    default init) outputs, within the fp32 tolerance, its last layer's bias
    whatever the input: degenerate. L3-034 (an RNN's hidden state) is not."""
    deep = validate_reference((kernelbench / "level3" / "3_DeepNarrowMLP.py").read_text(), "L3-003",
                              forward="always", timeout_s=600)
    assert deep["forward"] == "ran" and deep["degenerate"] is True, deep
    assert deep["degenerate_reason"].startswith("the outputs do not depend on the inputs"), deep
    rnn = validate_reference((kernelbench / "level3" / "34_VanillaRNNHidden.py").read_text(), "L3-034")
    assert rnn["forward"] == "ran" and rnn["degenerate"] is False, rnn
