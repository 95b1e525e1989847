# Shared definitions: the validated study, paths, wildcard constraints, helpers.
import json
import re
import sys
from pathlib import Path

from snakemake.exceptions import WorkflowError

_SRC = Path(workflow.basedir) / "src"
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
BUILD = STUDY.build_cache()

# One interpreter for every job: the one running Snakemake, unless jobs run in
# conda environments (--sdm conda), where each env brings its own python.
_CONDA = "conda" in str(getattr(workflow.deployment_settings, "deployment_method", "")).lower()
PY = "python" if _CONDA else sys.executable
KS = f"{PY} -m kernelsweep"
# Timing jobs claim a device slot (distinct GPU per job, CUDA_VISIBLE_DEVICES set);
# on the CPU the single slot serialises timings so they never share cores.
TIMED = f"{PY} -m kernelsweep.gpu_slots run --slots-dir {RES}/.gpu-slots --gpus {'auto' if DEVICE == 'cuda' else 'cpu'} --"
TIMING_RESOURCE = {"gpu": 1} if DEVICE == "cuda" else {"cpu_timer": 1}

CELL = RES + "/runs/{model}/{method}/{task}/s{sample}"
TURN = CELL + "/t{turn}"
CAND = TURN + "/c{cand}"


def cell_log(stage, suffix):
    """Log path of a per-cell job: {results}/logs/{stage}/{model}/{method}/{task}/s{sample}/{suffix}."""
    return f"{RES}/logs/{stage}/" + "{model}/{method}/{task}/s{sample}/" + suffix


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


def method_of(wildcards):
    return METHODS[wildcards.method]


def as_json(obj):
    """Parameters are passed to stages as JSON; a change reruns the jobs that used them."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))


def cell_path(template, wildcards, **extra):
    values = {k: getattr(wildcards, k) for k in ("model", "method", "task", "sample") if hasattr(wildcards, k)}
    values.update(extra)
    return template.format(**values)


def evaluation_args():
    e = STUDY.config["evaluation"]
    return (
        f"--device {DEVICE} --precision {STUDY.config['precision']} --trials {e['trials']} "
        f"--timing-trials {e['timing_trials']} --warmup {e['warmup']} --timeout {e['timeout_s']} "
        f"--compile-timeout {e['compile_timeout_s']}"
    )
