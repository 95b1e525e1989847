# Stage 1: tasks. Only this rule may contact the Hugging Face hub; planning
# took the task ids from the config's selection without the network.


rule tasks:
    output:
        res(layout.TASK),
    log:
        res("logs/tasks/{task}.log"),
    localrule: True
    conda:
        CPU_ENV
    params:
        selection=as_json(STUDY.config["tasks"]),
        root=workflow.basedir,
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep tasks write --selection {params.selection:q} --repo-root {params.root:q} '
        "--task {wildcards.task} --out {output:q} > {log:q} 2>&1"


rule reference_source:
    """The reference as a module file, the form the evaluator and profiler import."""
    input:
        res(layout.TASK),
    output:
        res(layout.REFERENCE),
    log:
        res("logs/reference_source/{task}.log"),
    localrule: True
    conda:
        CPU_ENV
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep tasks reference {input:q} --out {output:q} > {log:q} 2>&1'
