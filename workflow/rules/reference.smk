# Stages 2-3: the reference's profile (input of guided prompts) and its
# baselines (eager and torch.compile), measured on the study's device.


rule profile:
    input:
        res(layout.REFERENCE),
    output:
        res(layout.PROFILE),
    log:
        res("logs/profile/{device}/{task}.log"),
    benchmark:
        res("benchmarks/profile/{device}/{task}.tsv")
    params:
        peaks=profile_peaks(),
        timeout=STUDY.config["profile"]["timeout_s"],
        precision=STUDY.config["precision"],
        slots=SLOTS,
    resources:
        **TIMING_RESOURCE,
    conda:
        TIMING_ENV
    shell:
        "$KERNELSWEEP_PYTHON -m kernelsweep gpu-slots run {params.slots} -- "
        "$KERNELSWEEP_PYTHON -m kernelsweep profile {input} --device {wildcards.device} --precision {params.precision} "
        "--timeout {params.timeout} {params.peaks} --out {output} > {log} 2>&1"


rule baseline:
    input:
        res(layout.REFERENCE),
    output:
        res(layout.BASELINE),
    log:
        res("logs/baseline/{device}/{task}.log"),
    benchmark:
        res("benchmarks/baseline/{device}/{task}.tsv")
    params:
        modes=",".join(STUDY.config["baseline"]["modes"]),
        trials=STUDY.config["baseline"]["timing_trials"],
        timeout=STUDY.config["baseline"]["timeout_s"],
        precision=STUDY.config["precision"],
        slots=SLOTS,
    resources:
        **TIMING_RESOURCE,
    conda:
        TIMING_ENV
    shell:
        "$KERNELSWEEP_PYTHON -m kernelsweep gpu-slots run {params.slots} -- "
        "$KERNELSWEEP_PYTHON -m kernelsweep baseline-task {input} --device {wildcards.device} --precision {params.precision} "
        "--modes {params.modes} --timing-trials {params.trials} --timeout {params.timeout} "
        "--out {output} > {log} 2>&1"
