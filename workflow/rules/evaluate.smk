# Stages 6-7: compile on CPU cores (no GPU held), then evaluate on a claimed
# device slot. The build cache is keyed by the candidate's source hash, so the
# evaluation finds the extension already built.


rule compile:
    input:
        candidate=CAND + "/candidate.py",
        response=CAND + "/response.json",
    output:
        CAND + "/build.json",
    log:
        cell_log("compile", "t{turn}/c{cand}.log"),
    benchmark:
        CAND + "/compile.benchmark.tsv"
    params:
        timeout=STUDY.config["evaluation"]["compile_timeout_s"],
        arch=STUDY.config["cuda_arch"],
    shell:
        "TORCH_CUDA_ARCH_LIST={params.arch:q} {PY} -m kernelsweep.stages.evaluate compile "
        "--candidate {input.candidate} --response {input.response} --device {DEVICE} "
        "--build-dir {BUILD} --timeout {params.timeout} --out {output} > {log} 2>&1"


rule evaluate:
    input:
        candidate=CAND + "/candidate.py",
        response=CAND + "/response.json",
        build=CAND + "/build.json",
        reference=RES + "/tasks/{task}.py",
        task=RES + "/tasks/{task}.json",
    output:
        CAND + "/eval.json",
    log:
        cell_log("evaluate", "t{turn}/c{cand}.log"),
    benchmark:
        CAND + "/evaluate.benchmark.tsv"
    params:
        args=evaluation_args(),
        arch=STUDY.config["cuda_arch"],
    resources:
        **TIMING_RESOURCE,
    shell:
        "TORCH_CUDA_ARCH_LIST={params.arch:q} {TIMED} {PY} -m kernelsweep.stages.evaluate evaluate "
        "--candidate {input.candidate} --response {input.response} --build {input.build} "
        "--reference {input.reference} --task {input.task} {params.args} --build-dir {BUILD} "
        "--out {output} > {log} 2>&1"
