"""profiles/slurm on a real (single-node) SLURM cluster: every job becomes a
SLURM job on the right partition, the timing job gets its GPU through the slot
wrapper, small jobs are grouped, and the results equal a local run's."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm_helpers import PROFILE, TINY, run_snakemake, scheduler_view, submitted_jobs

SNAKEFILE = TINY
TASKS = ["L0-001", "L0-002"]
STEPS = ["analysis", "brief", "candidate", "build", "eval", "select", "final"]
# Steps of rules the workflow marks `localrule` (they run beside Snakemake),
# and the partition every other step must have run on.
LOCAL_STEPS = {"tasks", "final", "report"}
PARTITION = {"analysis": "cpu", "brief": "cpu", "candidate": "cpu", "build": "cpu", "eval": "gpu", "select": "gpu"}


def outputs(workdir: Path) -> dict[str, dict]:
    found = {str(p.relative_to(workdir)): json.loads(p.read_text()) for p in sorted((workdir / "out").rglob("*.json"))}
    expected = {f"out/tasks/{t}.json" for t in TASKS} | {f"out/{t}/{s}.json" for t in TASKS for s in STEPS}
    assert set(found) == expected | {"out/report.json"}
    return found


def step_of(path: str) -> str:
    return "tasks" if path.startswith("out/tasks/") else Path(path).stem


@pytest.mark.slurm
@pytest.mark.slow
def test_tiny_workflow_runs_as_slurm_jobs_and_matches_a_local_run(tiny_workflow_on_slurm, tmp_path):
    local_dir, slurm_dir = tmp_path / "local", tiny_workflow_on_slurm.workdir
    run_snakemake(["-s", str(SNAKEFILE), "--cores", "2", "--resources", "gpu=1"], local_dir, timeout=300)
    tiny_workflow_on_slurm.wait(timeout=900)  # the SLURM run, started by the fixture (conftest.py)
    local, slurm = outputs(local_dir), outputs(slurm_dir)

    # Same results, step by step.
    assert {k: v["value"] for k, v in slurm.items()} == {k: v["value"] for k, v in local.items()}
    assert all(v["where"]["SLURM_JOB_ID"] is None for v in local.values())

    # Local rules ran beside Snakemake; every other step inside a SLURM job
    # that the plugin submitted and logged, and that squeue saw complete.
    remote = {k: v for k, v in slurm.items() if step_of(k) not in LOCAL_STEPS}
    assert all(v["where"]["SLURM_JOB_ID"] is None for k, v in slurm.items() if k not in remote)
    jobs = submitted_jobs(slurm_dir)
    logged_ids = {job.job_id for job in jobs}
    recorded_ids = {v["where"]["SLURM_JOB_ID"] for v in remote.values()}
    assert None not in recorded_ids
    assert recorded_ids == logged_ids
    view = scheduler_view(sorted(logged_ids))
    assert {job_id: v[0] for job_id, v in view.items()} == {job_id: "COMPLETED" for job_id in logged_ids}

    # Partitions: timing on the GPU partition, everything else on the CPU one;
    # the recorded partition is the one the scheduler ran the job on.
    for path, rec in remote.items():
        where = rec["where"]
        assert where["SLURM_JOB_PARTITION"] == PARTITION[step_of(path)], path
        assert view[where["SLURM_JOB_ID"]][1] == where["SLURM_JOB_PARTITION"], path
        if step_of(path) == "eval":
            # SLURM gave the job its GPU (CUDA_VISIBLE_DEVICES=0); the wrapper
            # mapped slot 0 onto it rather than inventing an id.
            assert where["CUDA_VISIBLE_DEVICES"] == "0" and where["KERNELSWEEP_GPU_SLOT"] == "0", path
        elif step_of(path) == "select":  # the same job, after its evaluation, outside the wrapper
            assert where["CUDA_VISIBLE_DEVICES"] == "0" and where["KERNELSWEEP_GPU_SLOT"] is None, path
        else:
            assert where["CUDA_VISIBLE_DEVICES"] is None, path
        if step_of(path) == "build":
            # A rule's threads become the job's CPUs (and reach the command).
            assert where["THREADS"] == "2" and view[where["SLURM_JOB_ID"]][2] == 2, path

    # Grouping: both cells' analyze + research calls shared one submission.
    role_ids = {slurm[f"out/{t}/{s}.json"]["where"]["SLURM_JOB_ID"] for t in TASKS for s in ("analysis", "brief")}
    assert len(role_ids) == 1, f"analyze/research were not grouped: {role_ids}"
    assert any(job.name.startswith("group_roles") for job in jobs), [job.name for job in jobs]
    # Timing jobs stay one per turn, its selection in the same job.
    assert len({slurm[f"out/{t}/eval.json"]["where"]["SLURM_JOB_ID"] for t in TASKS}) == 2
    assert all(slurm[f"out/{t}/select.json"]["where"]["SLURM_JOB_ID"] == slurm[f"out/{t}/eval.json"]["where"]["SLURM_JOB_ID"]
               for t in TASKS)


def dry_run_resources(tmp_path: Path, **env: str) -> dict[str, str]:
    """The resources snakemake would give the evaluation jobs under the profile."""
    proc = run_snakemake(["-s", str(SNAKEFILE), "--workflow-profile", str(PROFILE), "-n"], tmp_path, timeout=120, **env)
    text = proc.stdout + proc.stderr
    block = text[text.index("rule evaluate_n1:"):]
    line = next(l for l in block.splitlines() if l.strip().startswith("resources:"))
    return dict(item.split("=", 1) for item in line.split(":", 1)[1].strip().split(", "))


@pytest.mark.slurm
def test_profile_environment_knobs(slurm_cluster, tmp_path):
    default = dry_run_resources(tmp_path / "a")
    assert default["slurm_partition"] == "gpu" and default["gpu"] == "1" and "gpu_model" not in default
    assert "slurm_account" not in default

    custom = dry_run_resources(
        tmp_path / "b",
        KERNELSWEEP_SLURM_GPU_PARTITION="a100q", KERNELSWEEP_SLURM_GPU_MODEL="a100",
        KERNELSWEEP_SLURM_ACCOUNT="proj42",
    )
    assert custom["slurm_partition"] == "a100q" and custom["gpu_model"] == "a100"
    assert custom["slurm_account"] == "proj42"

    cpu_study = dry_run_resources(tmp_path / "c", KERNELSWEEP_SLURM_TIMING_GPUS="0",
                                  KERNELSWEEP_SLURM_CPU_PARTITION="short")
    assert cpu_study["slurm_partition"] == "short" and cpu_study["gpu"] == "0"
