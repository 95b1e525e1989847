"""The real demo study through profiles/slurm: its verdicts must be the ones a
local run (`snakemake --cores 2 --configfile config/config.yaml`) gives, which
are known by design (EXPECTED below), so no local twin runs beside it.

Timings differ between any two runs, so only what does not depend on them is
compared: the cells, each cell's status, and the best candidate's category
(the four correct custom-kernel categories collapsed into one), compiled,
correct and custom_kernel flags.

A smaller demo, sized for CI: the demo's first task only; both model rows, with
three of the demo's methods that between them submit every kind of job the
study has (iterative: one-candidate turns, the second built on the first's
verdict; agentic: the grouped analyzer and researcher calls, a two-candidate
turn; react: the agent's own job; the first task's reference profile, which
only guided prompts read, is asked for as a target of its own); the eager
baseline only (the inductor baseline is a timing job like it, compiling for
minutes on a CPU); short replies; and the embedded model prepared once per
session (tests/conftest.py), not once per run.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from kernelsweep.core.verdict import SUCCESS_CATEGORIES
from slurm_helpers import PROFILE, REPO, SLURM_TEST_OPTIONS, run_snakemake, scheduler_view, submitted_jobs

CONFIG = REPO / "config" / "config.yaml"
SNAKEFILE = REPO / "Snakefile"
CORRECT_CUSTOM = SUCCESS_CATEGORIES  # a loaded machine may leave the timing without a verdict
TASK = "L0-001"  # the demo's first task: `tasks={ids: 1-1}`
METHODS = ("iterative", "agentic", "react")
# The study's default target, and the reference profile (a timing job) that no method here reads.
TARGETS = ["all", f"results/profile/cpu/fp32/{TASK}.json"]

# What a local run of this smaller demo gives (measured: 97 s alone on 2 cores).
# The recorded row's best candidate in each method is the `fused` source, a correct
# custom kernel on L0-001 (src/kernelsweep/demo_tasks/recorded/README.md; its local
# verdict is tested in tests/workflow/test_recorded_demo.py); the model writes no
# code block in 32 tokens, and its react agent, no candidate.
_CORRECT = {"status": "evaluated", "category": "correct_custom_kernel", "compiled": True, "correct": True,
            "custom_kernel": True}
_NO_CODE = {"status": "evaluated", "category": "no_code", "compiled": None, "correct": False,
            "custom_kernel": False}
_NO_CANDIDATE = {"status": "no_candidate", "category": None, "compiled": None, "correct": None,
                 "custom_kernel": None}
EXPECTED = {f"fp32/{model}/{method}/{TASK}/s0": verdict for model, method, verdict in (
    ("recorded-demo", "iterative", _CORRECT), ("recorded-demo", "agentic", _CORRECT),
    ("recorded-demo", "react", _CORRECT), ("gemma270m", "iterative", _NO_CODE),
    ("gemma270m", "agentic", _NO_CODE), ("gemma270m", "react", _NO_CANDIDATE))}

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(not (CONFIG.exists() and SNAKEFILE.exists()),
                       reason="the demo study (Snakefile, config/config.yaml) is not in this checkout"),
]


def verdicts(workdir: Path) -> dict[str, dict]:
    finals = sorted((workdir / "results" / "runs").rglob("final.json"))
    assert finals, f"no final.json under {workdir / 'results'}"
    table = {}
    for path in finals:
        final = json.loads(path.read_text())
        result = final.get("result") or {}
        category = result.get("category")
        table[str(path.parent.relative_to(workdir / "results" / "runs"))] = {
            "status": final.get("status"),
            "category": "correct_custom_kernel" if category in CORRECT_CUSTOM else category,
            "compiled": result.get("compiled"),
            "correct": result.get("correct"),
            "custom_kernel": result.get("custom_kernel"),
        }
    return table


def why(workdir: Path, cell: str) -> dict:
    """What a cell's best candidate got, with the flags, error and timing behind it."""
    result = json.loads((workdir / "results" / "runs" / cell / "final.json").read_text()).get("result") or {}
    error = result.get("error") or {}
    return {key: result.get(key) for key in ("category", "flags", "speedup", "timing")} | {
        "error": error.get("message") if isinstance(error, dict) else error}


def evaluated_by_the_evaluate_rule(workdir: Path) -> list[Path]:
    """eval.json files outside react cells (…/s{n}/react/ holds the agent's trajectory)."""
    return [p for p in (workdir / "results" / "runs").rglob("eval.json")
            if "react" not in p.relative_to(workdir / "results" / "runs").parts[4:]
            and not (p.parents[2] / "react").is_dir()]


def smaller_demo(folder: Path, checkpoint: Path, build_cache: Path) -> Path:
    """config/config.yaml, cut down as the module says; every other key as shipped."""
    config = yaml.safe_load(CONFIG.read_text())
    config["build_cache"] = str(build_cache)
    config["methods"] = {name: config["methods"][name] for name in METHODS}
    config["baseline"]["modes"] = ["eager"]
    # Short replies: the test is about SLURM matching a local run, and every SLURM job loads the
    # model itself (576-token replies made this test 14 minutes of CI). The 270M model writes no
    # kernel in 96 tokens either (every gemma cell is no_code), so 32, and 16 for the roles' prose:
    # both runs spend their minutes on ~1-2.6k-token prompts and the recorded row's builds.
    config["models"]["gemma270m"].update(max_tokens=32, path=str(checkpoint))
    config["methods"]["agentic"]["role_max_tokens"] = 16
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "demo.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


# start_tiny_workflow: test_slurm_profile.py's SLURM run waits on the scheduler beside this test's work.
@pytest.mark.usefixtures("start_tiny_workflow")
def test_demo_study_on_slurm_gets_the_local_verdicts(slurm_cluster, embedded_checkpoint, study_build_cache,
                                                     tmp_path):
    slurm_dir = tmp_path / "slurm"
    # A `device: cpu` study: timing jobs on the CPU partition, no GPU requested. Its builds go
    # to the session's study cache, as a real study's shared cache: the fused kernel may be
    # found built by tests/workflow's demo run; the compile job of `chain_bad` (which no other
    # study here has) builds on the node.
    config = smaller_demo(slurm_dir, embedded_checkpoint, study_build_cache)
    slurm = [*TARGETS, "-s", str(SNAKEFILE), "--configfile", str(config),
             "--config", "tasks={ids: 1-1}", "--workflow-profile", str(PROFILE),
             *SLURM_TEST_OPTIONS]
    run_snakemake(slurm, slurm_dir, timeout=5400, KERNELSWEEP_SLURM_TIMING_GPUS="0")

    got = verdicts(slurm_dir)
    assert set(got) == set(EXPECTED), sorted(got)
    mismatches = {cell: {"expected": EXPECTED[cell], "slurm": why(slurm_dir, cell)}
                  for cell in EXPECTED if got[cell] != EXPECTED[cell]}
    assert not mismatches, json.dumps(mismatches, indent=1)

    # The cluster did the work: one completed SLURM job per turn's evaluations (a react
    # cell's evaluations are made inside its own react job).
    jobs = submitted_jobs(slurm_dir)
    evaluate_ids = [job.job_id for job in jobs if job.name.startswith("rule_evaluate_n")]
    assert len(evaluate_ids) == len({p.parents[1] for p in evaluated_by_the_evaluate_rule(slurm_dir)}) > 0
    states = scheduler_view([job.job_id for job in jobs])
    assert {v[0] for v in states.values()} == {"COMPLETED"}
    assert {states[i][1] for i in evaluate_ids} == {"cpu"}

    # The same command again under the profile finds nothing left to do.
    again = run_snakemake([*slurm, "-n"], slurm_dir, timeout=600, log="snakemake-again.out",
                          KERNELSWEEP_SLURM_TIMING_GPUS="0")
    assert "Nothing to be done" in again.stdout + again.stderr, (again.stdout + again.stderr)[-3000:]
