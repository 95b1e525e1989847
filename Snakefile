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
include: "workflow/rules/report.smk"


rule all:
    input:
        REPORT_OUTPUTS,
        FINALS,
        EVALS,
    default_target: True
