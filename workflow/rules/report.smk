# Stage 9: every number of the report comes from the raw per-cell files.


rule study_manifest:
    """What the report needs to know about the study: expected cells, method flags."""
    input:
        TASK_FILES,
    output:
        res(layout.STUDY_MANIFEST),
    log:
        res("logs/study_manifest.log"),
    localrule: True
    conda:
        CPU_ENV
    params:
        config=as_json(STUDY.config),
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep manifest --config {params.config:q} --tasks {input:q} --out {output:q} > {log:q} 2>&1'


rule report:
    input:
        study=res(layout.STUDY_MANIFEST),
        finals=FINALS,
        baselines=BASELINES,
    output:
        document=report(res(layout.REPORT), caption="../report/report_document.rst", category="Report"),
        tables=[
            report(res(f"report/tables/{name}.html"), caption=f"../report/table_{name}.rst", category="Tables")
            for name in REPORT_TABLES
        ],
        figures=[
            report(res(f"report/figures/{stem}.svg"), caption=f"../report/figure_{name}.rst", category="Figures")
            for name, stem in REPORT_FIGURE_FILES
        ],
    log:
        res("logs/report.log"),
    localrule: True
    conda:
        CPU_ENV
    threads: 2
    params:
        results=lambda w, input: str(Path(input.study).parents[1]),
        out=lambda w, output: str(Path(output.document).parent),
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep report --results {params.results:q} --out {params.out:q} --study {input.study:q} '
        "--jobs {threads} > {log:q} 2>&1"
