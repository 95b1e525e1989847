# The react strategy (kernelsweep.agent): one job per cell runs the whole
# tool-using trajectory and writes final.json, as every strategy does. A killed
# job resumes from its trace (layout.REACT_TRACE) without repeating a model call.
# Its tools claim the timing slot themselves, for each run/evaluate/profile
# only, so the job holds no GPU while the model thinks. (REACT_METHODS, react_spec: common.smk)

if REACT_METHODS:

    ruleorder: react > final

    rule react:
        input:
            task=res(layout.TASK),
            reference=res(layout.REFERENCE),
            model=model_ready,
        output:
            cell(layout.FINAL),
        log:
            cell_log("react", "react.log"),
        benchmark:
            cell_benchmark("react", "react.tsv")
        wildcard_constraints:
            method=_alternatives(REACT_METHODS),
        priority: MODEL_CALL_PRIORITY
        conda:
            TIMING_ENV
        params:
            spec=react_spec,
            arch=STUDY.config["cuda_arch"],
            cell_dir=str(Path(cell(layout.FINAL)).parent),
        shell:
            'TORCH_CUDA_ARCH_LIST={params.arch:q} "$KERNELSWEEP_PYTHON" -m kernelsweep react --spec {params.spec:q} '
            "--task {input.task:q} --reference {input.reference:q} --cell-dir {params.cell_dir:q} --out {output:q} "
            "> {log:q} 2>&1"
