# Stages 2-3: the reference's profile (input of guided prompts) and its
# baselines (eager and torch.compile), measured on the study's device, per
# precision (the reference cast to fp16 is another program than at fp32).
# Both take the device late, as evaluations do: the profile's child and each
# baseline mode's worker import torch and build the model while the job before
# still times.


rule profile:
    input:
        res(layout.REFERENCE),
    output:
        res(layout.PROFILE),
    log:
        res("logs/profile/{device}/{precision}/{task}.log"),
    benchmark:
        res("benchmarks/profile/{device}/{precision}/{task}.tsv")
    conda:
        TIMING_ENV
    resources:
        **TIMING_RESOURCE,
    params:
        peaks=profile_peaks(),
        timeout=STUDY.config["profile"]["timeout_s"],
        slots=SLOTS,
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep gpu-slots run {params.slots} --late -- '
        '"$KERNELSWEEP_PYTHON" -m kernelsweep profile {input:q} --device {wildcards.device} --precision {wildcards.precision} '
        "--timeout {params.timeout} {params.peaks} --out {output:q} > {log:q} 2>&1"


rule baseline:
    input:
        res(layout.REFERENCE),
    output:
        res(layout.BASELINE),
    log:
        res("logs/baseline/{device}/{precision}/{task}.log"),
    benchmark:
        res("benchmarks/baseline/{device}/{precision}/{task}.tsv")
    conda:
        TIMING_ENV
    resources:
        **TIMING_RESOURCE,
    params:
        modes=",".join(STUDY.config["baseline"]["modes"]),
        trials=STUDY.config["baseline"]["timing_trials"],
        timeout=STUDY.config["baseline"]["timeout_s"],
        slots=SLOTS,
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep gpu-slots run {params.slots} --late -- '
        '"$KERNELSWEEP_PYTHON" -m kernelsweep baseline-task {input:q} --device {wildcards.device} --precision {wildcards.precision} '
        "--modes {params.modes} --timing-trials {params.trials} --timeout {params.timeout} "
        "--out {output:q} > {log:q} 2>&1"
