# Stages 2-3: the reference's profile (input of guided prompts) and its
# baselines (eager and torch.compile), measured on the study's device.


rule profile:
    input:
        RES + "/tasks/{task}.py",
    output:
        RES + "/profile/{device}/{task}.json",
    log:
        RES + "/logs/profile/{device}/{task}.log",
    benchmark:
        RES + "/benchmarks/profile/{device}/{task}.tsv"
    params:
        peaks=lambda w: " ".join(
            f"--{k.replace('_', '-')} {v}"
            for k, v in STUDY.config["profile"].items()
            if k.startswith("peak_") and v is not None
        ),
        timeout=STUDY.config["profile"]["timeout_s"],
        precision=STUDY.config["precision"],
    resources:
        **TIMING_RESOURCE,
    shell:
        "{TIMED} {KS} profile {input} --device {wildcards.device} --precision {params.precision} "
        "--timeout {params.timeout} {params.peaks} --out {output} > {log} 2>&1"


rule baseline:
    input:
        RES + "/tasks/{task}.py",
    output:
        RES + "/baseline/{device}/{task}.json",
    log:
        RES + "/logs/baseline/{device}/{task}.log",
    benchmark:
        RES + "/benchmarks/baseline/{device}/{task}.tsv"
    params:
        modes=",".join(STUDY.config["baseline"]["modes"]),
        trials=STUDY.config["baseline"]["timing_trials"],
        timeout=STUDY.config["baseline"]["timeout_s"],
        precision=STUDY.config["precision"],
    resources:
        **TIMING_RESOURCE,
    shell:
        "{TIMED} {KS} baseline {input} --device {wildcards.device} --precision {params.precision} "
        "--modes {params.modes} --timing-trials {params.trials} --timeout {params.timeout} "
        "--out {output} > {log} 2>&1"
