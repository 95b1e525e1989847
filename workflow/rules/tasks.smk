# Stage 1: tasks. Only this rule may contact the Hugging Face hub; planning
# took the task ids from the config's selection without the network.


rule tasks:
    output:
        RES + "/tasks/{task}.json",
    log:
        RES + "/logs/tasks/{task}.log",
    params:
        selection=as_json(STUDY.config["tasks"]),
    localrule: True
    shell:
        "{KS} tasks write --selection {params.selection:q} --task {wildcards.task} --out {output} > {log} 2>&1"


rule reference_source:
    """The reference as a module file, the form the evaluator and profiler import."""
    input:
        RES + "/tasks/{task}.json",
    output:
        RES + "/tasks/{task}.py",
    localrule: True
    run:
        from kernelsweep.fileio import read_json, write_atomic

        write_atomic(output[0], read_json(input[0])["code"])
