# Stage 9: every number of the report comes from the raw per-cell files.

FINALS = [
    f"{RES}/runs/{c['model']}/{c['method']}/{c['task']}/s{c['sample']}/final.json" for c in STUDY.cells()
]
BASELINES = [f"{RES}/baseline/{DEVICE}/{t}.json" for t in STUDY.task_ids]
TASK_FILES = [f"{RES}/tasks/{t}.json" for t in STUDY.task_ids]
REPORT_DIR = RES + "/report"
REPORT_OUTPUTS = [REPORT_DIR + "/REPORT.md"]


rule study_manifest:
    """What the report needs to know about the study (its expected cells, method flags)."""
    input:
        TASK_FILES,
    output:
        REPORT_DIR + "/study.json",
    params:
        manifest=lambda w: as_json(
            {
                "device": DEVICE,
                "precision": STUDY.config["precision"],
                "models": STUDY.config["models"],
                "methods": METHODS,
                "ablation_base": STUDY.config["report"]["ablation_base"],
                "samples": STUDY.samples,
                "baseline_modes": STUDY.config["baseline"]["modes"],
                "config": STUDY.config,
            }
        ),
    localrule: True
    run:
        from kernelsweep.fileio import read_json, write_json

        manifest = json.loads(params.manifest)
        manifest["tasks"] = [
            {k: read_json(path)[k] for k in ("id", "level", "name")} for path in input
        ]
        write_json(output[0], manifest)


rule report:
    input:
        study=REPORT_DIR + "/study.json",
        finals=FINALS,
        baselines=BASELINES,
    output:
        REPORT_DIR + "/REPORT.md",
    log:
        RES + "/logs/report.log",
    localrule: True
    shell:
        "{KS} report --results {RES} --out {REPORT_DIR} --study {input.study} > {log} 2>&1"
