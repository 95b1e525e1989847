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
    default_target: True
    input:
        REPORT_OUTPUTS,
        FINALS,
        EVALS,
        OUTAGE_TARGETS,


# Before the first job (never while planning: `snakemake -n` changes nothing).
# A model server that is down is named before the first job, not after wait_s.
# Jobs on this machine share one server per in-process model for the whole run
# (kernelsweep.models.run_server; started by the first generation job that needs
# it, stopped below); a cluster job loads its model itself.
onstart:
    refuse_a_full_disk()
    set_job_environment(share_run_servers=workflow.local_exec and not workflow.remote_exec)
    refuse_unconfinable_workers(workflow)
    for _warning in preflight.unanswered_servers(MODELS):
        print(f"kernelsweep: WARNING: {_warning}", file=sys.stderr)


onsuccess:
    for _line in run_server.stop_all(RUN_SERVERS):
        print(f"kernelsweep: model server {_line}", file=sys.stderr)


# A job's log is empty when the disk is full: name the cause after failures.
onerror:
    for _line in run_server.stop_all(RUN_SERVERS):
        print(f"kernelsweep: model server {_line}", file=sys.stderr)
    if preflight.disk_note(RES):
        print(f"kernelsweep: {preflight.disk_note(RES)}", file=sys.stderr)
