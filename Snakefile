# kernelsweep: model × method × task × sample, every cell its own files.
# Thin on purpose: the logic lives in src/kernelsweep, the stages in workflow/rules.
from snakemake.utils import min_version

min_version("9.20")


# The embedded demo by default; `--configfile FILE` replaces it (not merged into it,
# so the reference study never inherits the demo's models or methods).
if not workflow.config_settings.configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/tasks.smk"
include: "workflow/rules/models.smk"
include: "workflow/rules/reference.smk"
include: "workflow/rules/strategies.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/react.smk"
include: "workflow/rules/report.smk"


rule all:
    input:
        REPORT_OUTPUTS,
        FINALS,
        EVALS,
    default_target: True


# A model server that is down is named before the first job, not after wait_s.
onstart:
    for _warning in preflight.unanswered_servers(MODELS):
        print(f"kernelsweep: WARNING: {_warning}", file=sys.stderr)


# A job's log is empty when the disk is full: name the cause after failures.
onerror:
    if preflight.disk_note(RES):
        print(f"kernelsweep: {preflight.disk_note(RES)}", file=sys.stderr)
