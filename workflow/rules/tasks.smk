# Stage 1: tasks. Only this rule may contact the Hugging Face hub; planning
# took the task ids from the config's selection without the network.


rule tasks:
    output:
        res("tasks/{task}.json"),
    log:
        res("logs/tasks/{task}.log"),
    params:
        selection=selection_flags(STUDY.config["tasks"]),
    conda:
        CPU_ENV
    localrule: True
    shell:
        "$KERNELSWEEP_PYTHON -m kernelsweep tasks write {params.selection} --task {wildcards.task} --out {output} > {log} 2>&1"


rule reference_source:
    """The reference as a module file, the form the evaluator and profiler import."""
    input:
        res("tasks/{task}.json"),
    output:
        res("tasks/{task}.py"),
    log:
        res("logs/reference_source/{task}.log"),
    params:
    conda:
        CPU_ENV
    localrule: True
    shell:
        "$KERNELSWEEP_PYTHON -c 'import json, sys; sys.stdout.write(json.load(open(sys.argv[1]))[\"code\"])' "
        "{input} > {output} 2> {log}"
