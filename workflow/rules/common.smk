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

from kernelsweep.study import ConfigError, load_study  # noqa: E402
from kernelsweep.tasks import TaskError  # noqa: E402

try:
    STUDY = load_study(config, workflow.basedir)
except (ConfigError, TaskError) as error:
    raise WorkflowError(str(error)) from None

RES = STUDY.results
DEVICE = STUDY.device
METHODS = STUDY.methods
MODELS = STUDY.config["models"]
BUILD = STUDY.build_cache()

# One interpreter for every job: the one running Snakemake, unless jobs run in
# conda environments (--sdm conda), where each env brings its own python and the
# package's src/ goes on PYTHONPATH (it is not installed there). Jobs find it in
# the environment ($KERNELSWEEP_PYTHON), not in params: Snakemake reruns a job
# whose params changed, and the interpreter's path differs between `snakemake`
# and `python -m snakemake`, or between two checkouts of one study. (A SLURM job
# parses this file again and sets it for itself.)
_CONDA = "conda" in str(getattr(workflow.deployment_settings, "deployment_method", "")).lower()
os.environ.update(KERNELSWEEP_PYTHON="python" if _CONDA else sys.executable)
if _CONDA:
    os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (str(_SRC), os.environ.get("PYTHONPATH")) if p))
CPU_ENV = "../../envs/cpu.yaml"
TIMING_ENV = "../../envs/cuda.yaml" if DEVICE == "cuda" else CPU_ENV
# Generation on a GPU (transformers backend with device cuda) needs the CUDA env.
GEN_ENV = (
    "../../envs/cuda.yaml"
    if any(str(m.get("device", "")).startswith("cuda") for m in MODELS.values())
    else CPU_ENV
)
# Timing jobs claim a device slot (a distinct GPU per job, CUDA_VISIBLE_DEVICES
# set); on the CPU the single slot serialises timings so they never share cores.
# Locks live under {results} locally and on node-local /tmp inside SLURM jobs.
# Arguments of `kernelsweep.gpu_slots run` (the timed rules' wrapper).
SLOTS = f"--results {shlex.quote(str(RES))} --gpus {'auto' if DEVICE == 'cuda' else 'cpu'}"
if STUDY.config["timing_devices"]:
    SLOTS += " --devices " + ",".join(map(str, STUDY.config["timing_devices"]))
TIMING_RESOURCE = {"gpu": 1} if DEVICE == "cuda" else {"cpu_timer": 1}
PREPARED_MARKER = ".kernelsweep-prepared"


def res(path):
    return f"{RES}/{path}"


CELL = res("runs/{model}/{method}/{task}/s{sample}")
TURN = f"{CELL}/t{{turn}}"
CAND = f"{TURN}/c{{cand}}"


def cell(path):
    return f"{CELL}/{path}"


def turn(path):
    return f"{TURN}/{path}"


def cand(path):
    return f"{CAND}/{path}"


def cell_log(stage, suffix):
    """{results}/logs/{stage}/{model}/{method}/{task}/s{sample}/{suffix}"""
    return res(f"logs/{stage}/{{model}}/{{method}}/{{task}}/s{{sample}}/{suffix}")


def cell_benchmark(stage, suffix):
    return res(f"benchmarks/{stage}/{{model}}/{{method}}/{{task}}/s{{sample}}/{suffix}")


def _alternatives(names):
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    model=_alternatives(STUDY.models),
    method=_alternatives(METHODS),
    task=r"L\d-\d{3}",
    sample=r"\d+",
    turn=r"\d+",
    cand=r"\d+",
    device=r"cpu|cuda",


def as_json(obj):
    """Parameters are passed to stages as JSON; a change reruns the jobs that used them."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def method_of(wildcards):
    return METHODS[wildcards.method]


def is_agentic(m):
    return m["strategy"] == "agentic"


def fill(template, wildcards, **values):
    """A path template with the cell's wildcards and the given turn/cand filled in."""
    known = {k: getattr(wildcards, k) for k in ("model", "method", "task", "sample", "turn") if hasattr(wildcards, k)}
    return template.format(**{**known, **values})


def methods_with_n(n):
    return _alternatives(name for name, m in METHODS.items() if m["n"] == n)


# -- tasks -------------------------------------------------------------------


def selection_flags(selection):
    """The config's tasks: selection as `kernelsweep tasks` flags."""
    flags = []
    for key in ("source", "path", "repo", "revision", "cache_dir", "names"):
        if selection.get(key) is not None:
            flags.append(f"--{key.replace('_', '-')} {shlex.quote(str(selection[key]))}")
    if selection.get("levels"):
        levels = ",".join(map(str, selection["levels"]))
        flags.append(f"--levels {levels}")
    ids = selection.get("ids", "all")
    ids = ids if isinstance(ids, str) else ",".join(map(str, ids))
    flags.append(f"--ids {shlex.quote(ids)}")
    flags.append(f"--repo-root {shlex.quote(str(workflow.basedir))}")
    return " ".join(flags)


def profile_peaks():
    return " ".join(
        f"--{k.replace('_', '-')} {v}" for k, v in STUDY.config["profile"].items() if k.startswith("peak_") and v is not None
    )


# -- models ------------------------------------------------------------------


def model_ready(wildcards):
    """The prepared-checkpoint marker a model call needs, if any."""
    spec = MODELS[wildcards.model]
    return [f"{spec['path']}/{PREPARED_MARKER}"] if spec.get("prepare") == "embedded" else []


PREPARED_CHECKPOINTS = sorted({m["path"] for m in MODELS.values() if m.get("prepare") == "embedded"})


# -- strategies ----------------------------------------------------------------


def prompt_spec(wildcards, role):
    """Everything a prompt builder needs besides its input files."""
    return as_json(
        {
            "role": role,
            # analyzer and researcher run once, before turn 0: their calls count as turn 0
            "key": {k: getattr(wildcards, k, "0") for k in ("model", "method", "task", "sample", "turn")},
            "method": method_of(wildcards),
            "model": MODELS[wildcards.model],
            "device": DEVICE,
            "precision": STUDY.config["precision"],
            "corpus": STUDY.config["corpus"],
        }
    )


def role_inputs(wildcards, role=None):
    """Files a generator prompt (role None) or an agentic role's prompt reads."""
    m = method_of(wildcards)
    found = {"task": res(f"tasks/{wildcards.task}.json")}
    if m["profile"]:
        found["profile"] = res(f"profile/{DEVICE}/{wildcards.task}.json")
    if role is None:
        t = int(wildcards.turn)
        if t > 0:
            found["previous"] = fill(turn("select.json"), wildcards, turn=t - 1)
            if is_agentic(m) and m["feedback"]:
                found["feedback"] = fill(turn("feedback/response.json"), wildcards, turn=t - 1)
        if is_agentic(m) and m["analyzer"]:
            found["analysis"] = fill(cell("roles/analyzer/response.json"), wildcards)
        if is_agentic(m) and m["researcher"]:
            found["brief"] = fill(cell("roles/researcher/response.json"), wildcards)
    elif role == "researcher" and m["analyzer"]:
        found["analysis"] = fill(cell("roles/analyzer/response.json"), wildcards)
    elif role == "feedback":
        found["selection"] = fill(turn("select.json"), wildcards)
    return found


def generator_inputs(wildcards):
    return {**role_inputs(wildcards), "model": model_ready(wildcards)}


def role_rule_inputs(role):
    return lambda wildcards: {**role_inputs(wildcards, role), "model": model_ready(wildcards)}


def select_inputs(wildcards):
    m, t = method_of(wildcards), int(wildcards.turn)
    found = {"evals": [fill(cand("eval.json"), wildcards, cand=c) for c in range(m["n"])]}
    if t > 0:
        found["previous"] = fill(turn("select.json"), wildcards, turn=t - 1)
    return found


def final_inputs(wildcards):
    m = method_of(wildcards)
    turns = range(m["turns"])
    per_cand = [(t, c) for t in turns for c in range(m["n"])]
    roles = []
    if is_agentic(m) and m["analyzer"]:
        roles.append(fill(cell("roles/analyzer/response.json"), wildcards))
    if is_agentic(m) and m["researcher"]:
        roles.append(fill(cell("roles/researcher/response.json"), wildcards))
    if is_agentic(m) and m["feedback"]:
        roles += [fill(turn("feedback/response.json"), wildcards, turn=t) for t in turns[:-1]]
    return {
        "selection": fill(turn("select.json"), wildcards, turn=m["turns"] - 1),
        "responses": [fill(cand("response.json"), wildcards, turn=t, cand=c) for t, c in per_cand],
        "evals": [fill(cand("eval.json"), wildcards, turn=t, cand=c) for t, c in per_cand],
        "roles": roles,
    }


# -- evaluation ----------------------------------------------------------------


def evaluation_args():
    e = STUDY.config["evaluation"]
    return (
        f"--device {DEVICE} --precision {STUDY.config['precision']} --trials {e['trials']} "
        f"--timing-trials {e['timing_trials']} --warmup {e['warmup']} --timeout {e['timeout_s']} "
        f"--compile-timeout {e['compile_timeout_s']} --equivalence-margin {e['equivalence_margin']}"
    )


# -- report ------------------------------------------------------------------

FINALS = [cell("final.json").format(**c) for c in STUDY.cells()]
# Every evaluation is a target of its own: Snakemake does not regenerate a deleted
# intermediate file whose consumers are up to date, and a deleted eval.json must
# come back (with what depends on it).
EVALS = [
    cand("eval.json").format(**c, turn=t, cand=k)
    for c in STUDY.cells()
    for t in range(METHODS[c["method"]]["turns"])
    for k in range(METHODS[c["method"]]["n"])
]
BASELINES = [res(f"baseline/{DEVICE}/{t}.json") for t in STUDY.task_ids]
TASK_FILES = [res(f"tasks/{t}.json") for t in STUDY.task_ids]
REPORT_OUTPUTS = [res("report/REPORT.md")]
REPORT_TABLES = ("headline", "levels", "ablation", "best_of_n", "taxonomy", "per_task")
REPORT_FIGURES = ("best_of_n", "speedup_cdf", "success_vs_attempts", "success_vs_tokens", "level_heatmap")


def study_manifest():
    return as_json(
        {
            "device": DEVICE,
            "precision": STUDY.config["precision"],
            "models": MODELS,
            "methods": METHODS,
            "ablation_base": STUDY.config["report"]["ablation_base"],
            "samples": STUDY.samples,
            "baseline_modes": STUDY.config["baseline"]["modes"],
            "config": STUDY.config,
        }
    )
