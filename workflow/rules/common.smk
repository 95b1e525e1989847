# Shared definitions: the validated study, paths, wildcard constraints and the
# input functions of every rule (rule files hold rules only).
import json
import os
import re
import shlex
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

_SRC = Path(workflow.basedir, "src")
if str(_SRC) not in sys.path:  # a plain checkout works without `pip install -e .` for planning
    sys.path.insert(0, str(_SRC))

from kernelsweep.study import layout  # noqa: E402
from kernelsweep.models.checkpoint import MARKER as PREPARED_MARKER  # noqa: E402
from kernelsweep.study.matrix import ConfigError, load_study  # noqa: E402
from kernelsweep.tasks import TaskError  # noqa: E402

try:
    STUDY = load_study(config, workflow.basedir)
except (ConfigError, TaskError) as error:
    raise WorkflowError(str(error)) from None

RES = STUDY.results

# Planning reads and never writes: a parse (and `snakemake -n`) writes, moves and
# deletes nothing and leaves this process's environment alone. What changes
# files or the environment is in the Snakefile's onstart, which runs only when
# jobs are about to run. Checks below are only in the main process: a cluster
# job parses this file again and must leave results alone.
from kernelsweep.commands import check as preflight  # noqa: E402
from kernelsweep.study import relayout, stale
from kernelsweep.models import run_server  # noqa: E402

# Results from before precision was a path part would be recomputed, not found: stop and say so.
if workflow.is_main_process and relayout.legacy_paths(RES):
    raise WorkflowError(relayout.legacy_note(RES))

DEVICE = STUDY.device
METHODS = STUDY.methods
MODELS = STUDY.config["models"]
BUILD = STUDY.build_cache()
# The run's model servers (Snakefile onstart/onsuccess/onerror): state files, logs, locks.
RUN_SERVERS = str(Path(RES, ".run-servers").resolve())

# One interpreter for every job: the one running Snakemake, unless jobs run in
# conda environments (--sdm conda), where each env brings its own python and the
# package's src/ goes on PYTHONPATH (it is not installed there). Jobs find it in
# the environment ($KERNELSWEEP_PYTHON), not in params: Snakemake reruns a job
# whose params changed, and the interpreter's path differs between `snakemake`
# and `python -m snakemake`, or between two checkouts of one study.
_CONDA = "conda" in str(getattr(workflow.deployment_settings, "deployment_method", "")).lower()


def set_job_environment(share_run_servers):
    """The variables the jobs' commands read. Set by onstart for the jobs of this
    run; a cluster job (which runs no onstart) sets them for itself at parse time.
    Jobs on this machine share the run's model servers (kernelsweep.models.run_server);
    a cluster job loads its model itself."""
    os.environ.update(KERNELSWEEP_PYTHON="python" if _CONDA else sys.executable)
    if _CONDA:
        os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (str(_SRC), os.environ.get("PYTHONPATH")) if p))
    if share_run_servers:
        os.environ[run_server.ENV] = RUN_SERVERS
    else:
        os.environ.pop(run_server.ENV, None)


if not workflow.is_main_process:
    set_job_environment(share_run_servers=False)


def refuse_a_full_disk():
    """A full disk fails every job with an empty log (the log cannot be written either)."""
    if preflight.free_bytes(RES) < preflight.FULL_DISK_BYTES:
        raise WorkflowError(f"kernelsweep: {preflight.disk_note(RES)}")


def refuse_unconfinable_workers(workflow):
    """Candidate code runs confined: before any job of this machine runs one, a
    confined worker must import torch and the harness (`kernelsweep confinement`);
    cluster jobs check on their own node."""
    if not (workflow.local_exec and not workflow.remote_exec):
        return
    problem = preflight.confinement_problem([job.rule.name for job in workflow.dag.needrun_jobs()], DEVICE)
    if problem:
        raise WorkflowError(f"kernelsweep: {problem}")


CPU_ENV = "../../envs/cpu.yaml"
TIMING_ENV = "../../envs/cuda.yaml" if DEVICE == "cuda" else CPU_ENV
# Generation on a GPU (transformers backend with device cuda) needs the CUDA env.
GEN_ENV = (
    "../../envs/cuda.yaml" if any(str(m.get("device", "")).startswith("cuda") for m in MODELS.values()) else CPU_ENV
)
# Timing jobs claim a device slot (a distinct GPU per job, CUDA_VISIBLE_DEVICES
# set); on the CPU the single slot serialises timings so they never share cores.
# Locks live under {results} locally and on node-local /tmp inside SLURM jobs.
# Arguments of `kernelsweep gpu-slots run` (the timed rules' wrapper).
SLOTS = f"--results {shlex.quote(str(RES))} --gpus {'auto' if DEVICE == 'cuda' else 'cpu'}"
if STUDY.config["timing_devices"]:
    SLOTS += " --devices " + ",".join(map(str, STUDY.config["timing_devices"]))
TIMING_RESOURCE = {"gpu": 1} if DEVICE == "cuda" else {"cpu_timer": 1}


def shell_constant(text):
    """TEXT in a shell template as is (its braces escaped): a value the same for every
    job of a rule is written into the command, not a param Snakemake evaluates per job
    (planning time: thousands of jobs per rule in the reference study)."""
    return text.replace("{", "{{").replace("}", "}}")


ARCH_ENV = shell_constant(f"TORCH_CUDA_ARCH_LIST={shlex.quote(str(STUDY.config['cuda_arch']))}")


def res(path):
    return f"{RES}/{path}"


CELL = res(layout.CELL)
TURN = res(layout.TURN)
CAND = res(layout.CAND)


def turn_cand(c, name):
    """A file of candidate c of a turn (the other wildcards are left to the rule)."""
    return f"{CAND.replace('{cand}', str(c))}/{name}"


def cell(path):
    return f"{CELL}/{path}"


def turn(path):
    return f"{TURN}/{path}"


def cand(path):
    return f"{CAND}/{path}"


def cell_log(stage, suffix):
    """{results}/logs/{stage}/{precision}/{model}/{method}/{task}/s{sample}/{suffix}"""
    return res(f"logs/{stage}/{layout.CELL_KEY}/{suffix}")


def cell_benchmark(stage, suffix):
    return res(f"benchmarks/{stage}/{layout.CELL_KEY}/{suffix}")


def _alternatives(names):
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    **{**layout.WILDCARDS, "precision": _alternatives(STUDY.precisions)},
    model=_alternatives(STUDY.models),
    method=_alternatives(METHODS),


def as_json(obj):
    """Parameters are passed to stages as JSON; a change reruns the jobs that used them."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def method_of(wildcards):
    return METHODS[wildcards.method]


def fill(template, wildcards, **values):
    """A path template with the cell's wildcards and the given turn/cand filled in."""
    known = {
        k: getattr(wildcards, k)
        for k in ("precision", "model", "method", "task", "sample", "turn")
        if hasattr(wildcards, k)
    }
    return template.format(**{**known, **values})


def methods_with_n(n):
    # react cells are one trajectory job (react.smk), not turns of candidates
    return _alternatives(name for name, m in METHODS.items() if m["n"] == n and m["strategy"] != "react")


# -- react (the tool-using agent, react.smk) ------------------------------------

REACT_METHODS = [name for name, m in METHODS.items() if m["strategy"] == "react"]


def react_spec(wildcards):
    """Everything a trajectory needs besides its input files (kernelsweep.agent.cell)."""
    return as_json(
        {
            "model": wildcards.model,
            "model_spec": MODELS[wildcards.model],
            "method": wildcards.method,
            "method_flags": METHODS[wildcards.method],
            "task": wildcards.task,
            "sample": int(wildcards.sample),
            "device": DEVICE,
            "precision": wildcards.precision,
            "evaluation": STUDY.config["evaluation"],
            "profile_timeout_s": STUDY.config["profile"]["timeout_s"],
            "corpus": STUDY.config["corpus"],
            "build_dir": BUILD,
            "slots": {
                "results": RES,
                "gpus": "auto" if DEVICE == "cuda" else "cpu",
                "devices": ",".join(map(str, STUDY.config["timing_devices"] or [])) or None,
            },
        }
    )


# -- reference ---------------------------------------------------------------


def profile_peaks():
    return " ".join(
        f"--{k.replace('_', '-')} {v}"
        for k, v in STUDY.config["profile"].items()
        if k.startswith("peak_") and v is not None
    )


# -- models ------------------------------------------------------------------

# Model calls are the slowest steps of a study: a rule that calls a model is
# scheduled before ready compile/evaluate jobs, which fill the cores meanwhile.
MODEL_CALL_PRIORITY = 10


def model_ready(wildcards):
    """The prepared-checkpoint marker a model call needs, if any."""
    spec = MODELS[wildcards.model]
    return [f"{spec['path']}/{PREPARED_MARKER}"] if spec.get("prepare") == "embedded" else []


# Each model's spec as a generation job's parameter: encoded once, not per job.
MODEL_SPECS = {name: as_json(spec) for name, spec in MODELS.items()}
PREPARED_CHECKPOINTS = sorted({m["path"] for m in MODELS.values() if m.get("prepare") == "embedded"})


# -- strategies ----------------------------------------------------------------


def role_file(role, name):
    """A file of an agentic role's folder (analyzer, researcher: per cell; feedback: per turn)."""
    return res(f"{layout.ROLE_DIRS[role]}/{name}")


def prompt_spec(wildcards, role):
    """Everything a prompt builder needs besides its input files."""
    return as_json(
        {
            "role": role,
            # analyzer and researcher run once, before turn 0: their calls count as turn 0
            "key": {k: getattr(wildcards, k, "0") for k in ("precision", "model", "method", "task", "sample", "turn")},
            "method": method_of(wildcards),
            "model": MODELS[wildcards.model],
            "device": DEVICE,
            "precision": wildcards.precision,
            "corpus": STUDY.config["corpus"],
        }
    )


# The role flags are resolved by the study (kernelsweep.study.matrix.resolve_method): a
# method's analyzer/researcher/feedback is true only where the role runs.
def role_inputs(wildcards, role=None):
    """Files a generator prompt (role None) or an agentic role's prompt reads."""
    m = method_of(wildcards)
    found = {"task": res(layout.TASK.format(task=wildcards.task))}
    if m["profile"]:
        found["profile"] = res(layout.PROFILE.format(device=DEVICE, precision=wildcards.precision, task=wildcards.task))
    if role is None:
        t = int(wildcards.turn)
        if t > 0:
            found["previous"] = fill(turn(layout.SELECT), wildcards, turn=t - 1)
            if m["feedback"]:
                found["feedback"] = fill(role_file("feedback", layout.RESPONSE), wildcards, turn=t - 1)
        if m["analyzer"]:
            found["analysis"] = fill(role_file("analyzer", layout.RESPONSE), wildcards)
        if m["researcher"]:
            found["brief"] = fill(role_file("researcher", layout.RESPONSE), wildcards)
    elif role == "researcher" and m["analyzer"]:
        found["analysis"] = fill(role_file("analyzer", layout.RESPONSE), wildcards)
    elif role == "feedback":
        found["selection"] = fill(turn(layout.SELECT), wildcards)
    return found


def generator_inputs(wildcards):
    responses = [fill(cand(layout.RESPONSE), wildcards, cand=c) for c in range(method_of(wildcards)["n"])]
    return {**role_inputs(wildcards), "model": model_ready(wildcards), "retired": retired_inputs(responses)}


def role_rule_inputs(role):
    return lambda wildcards: {
        **role_inputs(wildcards, role),
        "model": model_ready(wildcards),
        "retired": retired_inputs([fill(role_file(role, layout.RESPONSE), wildcards)]),
    }


def prompt_inputs(input):
    """The inputs a prompt builder reads (not the model's marker, not retired records)."""
    return as_json({k: v for k, v in input.items() if k not in ("model", "retired")})


def evaluate_inputs(wildcards):
    """A turn's evaluation job: its candidates' builds and the previous turn's selection."""
    m, t = method_of(wildcards), int(wildcards.turn)
    found = {"builds": [fill(cand(layout.BUILD), wildcards, cand=c) for c in range(m["n"])]}
    if t > 0:
        found["previous"] = fill(turn(layout.SELECT), wildcards, turn=t - 1)
    return found


def final_inputs(wildcards):
    """The last selection (after every candidate's eval.json of the cell) and the roles'
    replies; `kernelsweep final` finds each candidate's files from the cell's layout."""
    m = method_of(wildcards)
    turns = range(m["turns"])
    roles = [fill(role_file(r, layout.RESPONSE), wildcards) for r in ("analyzer", "researcher") if m[r]]
    if m["feedback"]:
        roles += [fill(role_file("feedback", layout.RESPONSE), wildcards, turn=t) for t in turns[:-1]]
    return {"selection": fill(turn(layout.SELECT), wildcards, turn=m["turns"] - 1), "roles": roles}


# -- evaluation ----------------------------------------------------------------


def evaluation_args():
    """The evaluation's settings but its precision (the cell's, a wildcard)."""
    e = STUDY.config["evaluation"]
    return (
        f"--device {DEVICE} --trials {e['trials']} "
        f"--timing-trials {e['timing_trials']} --warmup {e['warmup']} --timeout {e['timeout_s']} "
        f"--compile-timeout {e['compile_timeout_s']} --equivalence-margin {e['equivalence_margin']} "
        f"--shape-variants {e['shape_variants']} --tolerance {e['tolerance']}"
    )


# -- report ------------------------------------------------------------------

FINALS = [cell(layout.FINAL).format(**c) for c in STUDY.cells()]
# Every evaluation is a target of its own: Snakemake does not regenerate a deleted
# intermediate file whose consumers are up to date, and a deleted eval.json must
# come back (with what depends on it).
EVALS = [
    cand(layout.EVAL).format(**c, turn=t, cand=k)
    for c in STUDY.cells()
    if METHODS[c["method"]]["strategy"] != "react"  # a react cell's eval.json comes with its final.json
    for t in range(METHODS[c["method"]]["turns"])
    for k in range(METHODS[c["method"]]["n"])
]
BASELINES = [
    res(layout.BASELINE.format(device=DEVICE, precision=p, task=t)) for p in STUDY.precisions for t in STUDY.task_ids
]
TASK_FILES = [res(layout.TASK.format(task=t)) for t in STUDY.task_ids]
REPORT_OUTPUTS = [res(layout.REPORT)]
REPORT_TABLES = ("headline", "levels", "ablation", "best_of_n", "taxonomy", "per_task")
REPORT_FIGURES = ("best_of_n", "speedup_cdf", "success_vs_attempts", "success_vs_tokens", "level_heatmap")
# (figure, file stem): one file per precision in a study of several (kernelsweep.report.build)
REPORT_FIGURE_FILES = [
    (name, layout.figure_stem(name, p))
    for name in REPORT_FIGURES
    for p in (STUDY.precisions if len(STUDY.precisions) > 1 else [None])
]

# -- outage records of earlier versions (README, "Results from earlier versions") --
# A response.json that records an outage makes its cell look finished. Planning
# only reads them: the job that wrote one gets the record's place under
# {results}/stale/ as one more input, made by rule retire_outage_record
# (strategies.smk), which moves the record there. Snakemake reruns a job whose set
# of inputs changed since it ran, and everything after it; the places are also
# targets of rule all, for jobs Snakemake has no record of. The moved record stays
# an input from then on (kernelsweep.study.stale), so the set does not change again.
# Found in the main process only: in a cluster job the record has been moved already.
_OUTAGES = {os.path.normpath(p): why for p, why in stale.find(RES)} if workflow.is_main_process else {}
_RETIRED = {os.path.normpath(p) for p in stale.retired(RES)}


def retired_place(response):
    return res(f"{layout.STALE}/{os.path.relpath(response, RES)}")


def retired_inputs(responses):
    """The retired-record inputs of a job that writes `responses` (paths of response.json)."""
    return [retired_place(r) for r in map(os.path.normpath, responses) if r in _OUTAGES or r in _RETIRED]


def move_outage_record(record, log):
    """What retire_outage_record runs (strategies.smk); `record` is its path under {results}."""
    kept = stale.move_aside(RES, res(record))
    Path(log).write_text(f"moved {res(record)} to {kept}\n")


# A response.json is in {cell}/t{turn}/c{cand}/, {cell}/roles/{role}/ or {cell}/t{turn}/feedback/.
_STUDY_CELLS = {os.path.dirname(f) for f in FINALS}
_PLANNED_OUTAGES = [p for p in _OUTAGES if os.path.dirname(os.path.dirname(os.path.dirname(p))) in _STUDY_CELLS]
OUTAGE_TARGETS = [retired_place(p) for p in _PLANNED_OUTAGES]
if _PLANNED_OUTAGES:
    print(
        f"kernelsweep: {len(_PLANNED_OUTAGES)} response record(s) held an outage, not a model's answer; "
        f"a run moves them to {RES}/{layout.STALE}/ and redoes their calls:",
        file=sys.stderr,
    )
    for _path in _PLANNED_OUTAGES[:10]:
        print(f"  {_path}: {_OUTAGES[_path][:200]}", file=sys.stderr)
