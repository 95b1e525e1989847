# Stages 6-7: compile on CPU cores (no GPU held), then evaluate on a claimed
# device slot. The build cache is keyed by the candidate's hash, so the
# evaluation finds the extension already built.


# One compile job per turn builds its n candidates in parallel on CPU cores.
for _n in sorted({m["n"] for m in METHODS.values()}):

    rule:
        name:
            f"compile_n{_n}"
        input:
            candidates=[turn_cand(c, layout.CANDIDATE) for c in range(_n)],
            responses=[turn_cand(c, layout.RESPONSE) for c in range(_n)],
        output:
            [turn_cand(c, layout.BUILD) for c in range(_n)],
        log:
            cell_log("compile", f"{layout.TURN_DIR}.log"),
        benchmark:
            cell_benchmark("compile", f"{layout.TURN_DIR}.tsv")
        wildcard_constraints:
            method=methods_with_n(_n),
        conda:
            TIMING_ENV
        threads: min(_n, 4)
        params:
            timeout=STUDY.config["evaluation"]["compile_timeout_s"],
            arch=STUDY.config["cuda_arch"],
            device=DEVICE,
            build=BUILD,
        shell:
            'TORCH_CUDA_ARCH_LIST={params.arch:q} "$KERNELSWEEP_PYTHON" -m kernelsweep compile-turn '
            "--candidates {input.candidates:q} --device {params.device} --jobs {threads} "
            "--build-dir {params.build:q} --timeout {params.timeout} > {log:q} 2>&1"


rule evaluate:
    input:
        candidate=cand(layout.CANDIDATE),
        response=cand(layout.RESPONSE),
        build=cand(layout.BUILD),
        reference=res(layout.REFERENCE),
        task=res(layout.TASK),
    output:
        cand(layout.EVAL),
    log:
        cell_log("evaluate", f"{layout.TURN_DIR}/{layout.CAND_DIR}.log"),
    benchmark:
        cell_benchmark("evaluate", f"{layout.TURN_DIR}/{layout.CAND_DIR}.tsv")
    conda:
        TIMING_ENV
    resources:
        **TIMING_RESOURCE,
    params:
        args=evaluation_args(),
        arch=STUDY.config["cuda_arch"],
        build=BUILD,
        slots=SLOTS,
    shell:
        'TORCH_CUDA_ARCH_LIST={params.arch:q} "$KERNELSWEEP_PYTHON" -m kernelsweep gpu-slots run {params.slots} --late -- '
        '"$KERNELSWEEP_PYTHON" -m kernelsweep evaluate-candidate '
        "--candidate {input.candidate:q} --response {input.response:q} --build {input.build:q} "
        "--reference {input.reference:q} --task {input.task:q} --precision {wildcards.precision} {params.args} "
        "--build-dir {params.build:q} "
        "--out {output:q} > {log:q} 2>&1"
