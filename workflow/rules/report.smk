# Stage 9: every number of the report comes from the raw per-cell files.


rule study_manifest:
    """What the report needs to know about the study: expected cells, method flags."""
    input:
        TASK_FILES,
    output:
        res("report/study.json"),
    log:
        res("logs/study_manifest.log"),
    params:
        manifest=study_manifest(),
        py=PY,
    conda:
        CPU_ENV
    localrule: True
    shell:
        "{params.py} -m kernelsweep.stages.manifest --manifest {params.manifest:q} --tasks {input} "
        "--out {output} > {log} 2>&1"


rule report:
    input:
        study=res("report/study.json"),
        finals=FINALS,
        baselines=BASELINES,
    output:
        res("report/REPORT.md"),
    log:
        res("logs/report.log"),
    params:
        ks=KS,
        results=lambda w, input: str(Path(input.study).parents[1]),
        out=lambda w, output: str(Path(output[0]).parent),
    conda:
        CPU_ENV
    localrule: True
    shell:
        "{params.ks} report --results {params.results} --out {params.out} --study {input.study} > {log} 2>&1"
