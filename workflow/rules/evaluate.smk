# Stages 6-7: compile on CPU cores (no GPU held), then evaluate on a claimed
# device slot. The build cache is keyed by the candidate's source hash, so the
# evaluation finds the extension already built.


# One compile job per turn builds its n candidates in parallel on CPU cores.
for _n in sorted({m["n"] for m in METHODS.values()}):

    rule:
        name:
            f"compile_n{_n}"
        input:
            candidates=[f"{TURN}/c{c}/candidate.py" for c in range(_n)],
            responses=[f"{TURN}/c{c}/response.json" for c in range(_n)],
        output:
            [f"{TURN}/c{c}/build.json" for c in range(_n)],
        log:
            cell_log("compile", "t{turn}.log"),
        benchmark:
            cell_benchmark("compile", "t{turn}.tsv")
        wildcard_constraints:
            method=methods_with_n(_n),
        threads: min(_n, 4)
        params:
            timeout=STUDY.config["evaluation"]["compile_timeout_s"],
            arch=STUDY.config["cuda_arch"],
            device=DEVICE,
            build=BUILD,
        conda:
            TIMING_ENV
        shell:
            "TORCH_CUDA_ARCH_LIST={params.arch:q} $KERNELSWEEP_PYTHON -m kernelsweep.stages.evaluate compile "
            "--candidates {input.candidates} --device {params.device} --jobs {threads} "
            "--build-dir {params.build} --timeout {params.timeout} > {log} 2>&1"


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
        build=BUILD,
        slots=SLOTS,
    resources:
        **TIMING_RESOURCE,
    conda:
        TIMING_ENV
    shell:
        "TORCH_CUDA_ARCH_LIST={params.arch:q} $KERNELSWEEP_PYTHON -m kernelsweep.gpu_slots run {params.slots} -- "
        "$KERNELSWEEP_PYTHON -m kernelsweep.stages.evaluate evaluate "
        "--candidate {input.candidate} --response {input.response} --build {input.build} "
        "--reference {input.reference} --task {input.task} {params.args} --build-dir {params.build} "
        "--out {output} > {log} 2>&1"
