# Models: an embedded checkpoint is prepared once; every model call of that
# model waits for it.

if PREPARED_CHECKPOINTS:

    rule prepare_model:
        output:
            f"{{checkpoint}}/{PREPARED_MARKER}",
        log:
            res("logs/prepare_model/{checkpoint}.log"),
        wildcard_constraints:
            checkpoint=_alternatives(PREPARED_CHECKPOINTS),
        # Started first: every call of its model waits for it (the demo's long pole).
        priority: 100
        conda:
            GEN_ENV
        shell:
            '"$KERNELSWEEP_PYTHON" -m kernelsweep prepare-model --out {wildcards.checkpoint} > {log:q} 2>&1'
