"""The bundled demo tasks and the local KernelBench checkout, end to end:
materialised to task files through the real validation child."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tasks_helpers import run_cli
from kernelsweep.core.fileio import sha256_file, sha256_text
from kernelsweep.tasks import TaskConfigError, TaskSourceError, materialize, plan_task_ids
from kernelsweep.tasks.demo import DEMO_DIR

DEMO_IDS = plan_task_ids({"source": "demo"})
# Each demo task is timed with 100 trials on a CPU in CI: keep them tiny.
MAX_DEMO_ELEMENTS = 1 << 20


def test_demo_files_follow_the_kernelbench_format():
    files = sorted(DEMO_DIR.glob("*.py"))
    assert len(files) >= 4
    for path in files:
        tree = ast.parse(path.read_text())
        top = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
        assert {"Model", "get_inputs", "get_init_inputs"} <= top, path.name
        constants = [t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
                     if isinstance(t, ast.Name)]
        assert constants, f"{path.name}: sizes belong in module-level constants"


@pytest.mark.parametrize("task_id", DEMO_IDS)
def test_demo_task_materialises_and_runs_on_cpu(task_id, tmp_path):
    out = tmp_path / "results" / "tasks" / f"{task_id}.json"
    record = materialize({"source": "demo"}, task_id, out)
    assert json.loads(out.read_text()) == record
    assert set(record) == {"id", "level", "problem_id", "name", "code", "sha256", "source", "validation", "scale"}
    assert record["scale"] is None  # tasks.scale absent: the task as written
    assert record["id"] == task_id and record["level"] == 0
    path = DEMO_DIR / f"{record['name']}.py"
    assert record["code"] == path.read_text() and record["sha256"] == sha256_file(path)
    assert record["source"]["kind"] == "demo"
    validation = record["validation"]
    assert validation["forward"] == "ran", validation
    assert validation["warnings"] == []
    assert validation["input_numel"] + validation["param_numel"] <= MAX_DEMO_ELEMENTS


def test_task_outside_the_selection_is_refused(tmp_path):
    with pytest.raises(TaskConfigError, match="L0-002 .* is not in the tasks selection"):
        materialize({"source": "demo", "ids": [1]}, "L0-002", tmp_path / "x.json", validate=False)
    with pytest.raises(TaskSourceError, match="L0-099: no such demo task"):
        materialize({"source": "demo"}, "L0-099", tmp_path / "x.json", validate=False)
    assert not (tmp_path / "x.json").exists()


def test_local_task_from_the_shared_checkout(kernelbench, tmp_path):
    out = tmp_path / "L1-001.json"
    record = materialize({"source": "local", "path": str(kernelbench), "levels": [1]}, "L1-001", out)
    source_file = kernelbench / "level1" / "1_Square_matrix_multiplication_.py"
    assert record["name"] == "1_Square_matrix_multiplication_"
    assert record["code"] == source_file.read_text() and record["sha256"] == sha256_text(record["code"])
    assert record["source"]["kind"] == "local"
    assert Path(record["source"]["location"]) == kernelbench.resolve()
    # Two 4096x4096 inputs: too big for a CPU forward, sized without allocating.
    validation = record["validation"]
    assert validation["forward"] == "skipped" and validation["input_numel"] == 2 * 4096 * 4096
    assert "above the CPU bound" in validation["skip_reason"]


def test_tasks_scale_shrinks_the_size_constants_before_everything(kernelbench, tmp_path):
    selection = {"source": "local", "path": str(kernelbench), "levels": [1], "scale": 0.25}
    record = materialize(selection, "L1-001", tmp_path / "L1-001.json")
    original = (kernelbench / "level1" / "1_Square_matrix_multiplication_.py").read_text()
    assert record["scale"] == {"factor": 0.25, "constants": {"N": [4096, 1024]},
                               "original_sha256": sha256_text(original)}
    assert "N = 1024" in record["code"] and record["sha256"] == sha256_text(record["code"])
    assert record["code"].count("\n") == original.count("\n")
    # validated at its scaled size: now small enough to run on the CPU
    assert record["validation"]["input_numel"] == 2 * 1024 * 1024 and record["validation"]["forward"] == "ran"
    with pytest.raises(TaskConfigError, match="tasks.scale"):
        materialize(dict(selection, scale=0), "L1-001", tmp_path / "x.json", validate=False)
    # L2-019: 64 channels / 16 = 4 no longer hold GroupNorm's 8 groups: only the batch is scaled
    record = materialize(dict(selection, levels=[2], scale=0.0625), "L2-019", tmp_path / "L2-019.json")
    assert record["scale"]["constants"] == {"batch_size": [128, 8]} and "num_groups" in record["scale"]["narrowed"]
    assert "batch_size   = 8" in record["code"] and "in_channels  = 64" in record["code"]


def test_local_task_with_a_huge_output_is_skipped_not_failed(kernelbench, tmp_path):
    # L1-009: 2M input elements (under the bound) but a 32768x32768 output.
    selection = {"source": "local", "path": str(kernelbench), "levels": [1]}
    record = materialize(selection, "L1-009", tmp_path / "L1-009.json", cpu_memory_mb=1024)
    validation = record["validation"]
    assert validation["forward"] == "skipped" and validation["input_numel"] == 2 * 32768 * 32
    assert validation["skip_reason"] == "forward needs more than 1024 MiB on the CPU (the auto-mode memory cap)"


def test_cli_write_and_list_with_a_config_file(kernelbench, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(f"results: results\ntasks:\n  source: local\n  path: {kernelbench}\n  levels: [2]\n  ids: \"1-2\"\n")
    proc = run_cli("list", "--config", str(config))
    assert proc.returncode == 0 and proc.stdout.split() == ["L2-001", "L2-002"]
    proc = run_cli("list", "--config", str(config), "--ids", "5", "--long")
    assert proc.returncode == 0 and proc.stdout.startswith("L2-005\t5_")
    out = tmp_path / "results" / "tasks" / "L2-002.json"
    proc = run_cli("write", "--config", str(config), "--task", "L2-002", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: L2-002 ")
    assert json.loads(out.read_text())["source"]["kind"] == "local"


def test_cli_write_with_the_workflow_selection_then_the_reference_module(tmp_path):
    out = tmp_path / "tasks" / "L0-002.json"
    selection = json.dumps({"source": "demo", "levels": [0], "ids": "all"})
    proc = run_cli("write", "--selection", selection, "--task", "L0-002", "--out", str(out), "--no-validate")
    assert proc.returncode == 0, proc.stderr
    module = out.with_suffix(".py")
    proc = run_cli("reference", str(out), "--out", str(module))
    assert proc.returncode == 0, proc.stderr
    assert module.read_text() == json.loads(out.read_text())["code"]
    proc = run_cli("list", "--selection", selection, "--config", str(tmp_path / "c.yaml"))
    assert proc.returncode == 2 and "not allowed with argument" in proc.stderr


def test_cli_errors_are_one_line_without_traceback(tmp_path):
    cases = [
        (["list"], "no selection"),
        (["list", "--config", str(tmp_path / "missing.yaml")], "cannot read config"),
        (["list", "--source", "local", "--path", str(tmp_path / "nope")], "local KernelBench checkout not found"),
        (["list", "--source", "demo", "--ids", "9-1"], "runs backwards"),
        (["list", "--source", "hub", "--levels", "x"], "--levels takes comma-separated integers"),
        (["write", "--source", "demo", "--task", "L0-1", "--out", str(tmp_path / "x.json")], "bad task id"),
    ]
    (tmp_path / "bad.yaml").write_text("tasks: [1, 2\n")
    cases.append((["list", "--config", str(tmp_path / "bad.yaml")], "is not valid YAML/JSON"))
    for args, message in cases:
        proc = run_cli(*args)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr, (args, proc.stderr)
