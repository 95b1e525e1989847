# Stages 6-7: compile on CPU cores (no GPU held), then evaluate on a claimed
# device slot. The build cache is keyed by the candidate's source hash, so the
# evaluation finds the extension already built.


rule compile:
    input:
        candidate=cand("candidate.py"),
        response=cand("response.json"),
    output:
        cand("build.json"),
    log:
        cell_log("compile", "t{turn}/c{cand}.log"),
    benchmark:
        res("benchmarks/compile/{model}/{method}/{task}/s{sample}/t{turn}/c{cand}.tsv")
    params:
        timeout=STUDY.config["evaluation"]["compile_timeout_s"],
        arch=STUDY.config["cuda_arch"],
        py=PY,
        device=DEVICE,
        build=BUILD,
    conda:
        TIMING_ENV
    shell:
        "TORCH_CUDA_ARCH_LIST={params.arch:q} {params.py} -m kernelsweep.stages.evaluate compile "
        "--candidate {input.candidate} --response {input.response} --device {params.device} "
        "--build-dir {params.build} --timeout {params.timeout} --out {output} > {log} 2>&1"


rule evaluate:
    input:
        candidate=cand("candidate.py"),
        response=cand("response.json"),
        build=cand("build.json"),
        reference=res("tasks/{task}.py"),
        task=res("tasks/{task}.json"),
    output:
        cand("eval.json"),
    log:
        cell_log("evaluate", "t{turn}/c{cand}.log"),
    benchmark:
        res("benchmarks/evaluate/{model}/{method}/{task}/s{sample}/t{turn}/c{cand}.tsv")
    params:
        args=evaluation_args(),
        arch=STUDY.config["cuda_arch"],
        timed=TIMED,
        py=PY,
        build=BUILD,
    resources:
        **TIMING_RESOURCE,
    conda:
        TIMING_ENV
    shell:
        "TORCH_CUDA_ARCH_LIST={params.arch:q} {params.timed} {params.py} -m kernelsweep.stages.evaluate evaluate "
        "--candidate {input.candidate} --response {input.response} --build {input.build} "
        "--reference {input.reference} --task {input.task} {params.args} --build-dir {params.build} "
        "--out {output} > {log} 2>&1"
