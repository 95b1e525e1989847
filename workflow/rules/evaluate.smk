# Stages 6-7: compile on CPU cores (no GPU held), then evaluate on a claimed
# device slot. The build cache is keyed by the candidate's hash, so the
# evaluation finds the extension already built.

# The commands, with the settings that are the same for every job written in
# (shell_constant, common.smk); {{...}} is left for Snakemake to fill per job.
_BUILD_DIR = shell_constant(f"--build-dir {shlex.quote(BUILD)}")
COMPILE_TURN = (
    f'{ARCH_ENV} "$KERNELSWEEP_PYTHON" -m kernelsweep compile-turn --candidates {{input.candidates:q}} --device {DEVICE} {_BUILD_DIR} '
    f"--jobs {{threads}} --timeout {STUDY.config['evaluation']['compile_timeout_s']} > {{log:q}} 2>&1"
)
EVALUATE_CANDIDATE = (
    f'{ARCH_ENV} "$KERNELSWEEP_PYTHON" -m kernelsweep gpu-slots run {shell_constant(SLOTS)} --late -- '
    '"$KERNELSWEEP_PYTHON" -m kernelsweep evaluate-candidate '
    "--build {input:q} "
    f"--precision {{wildcards.precision}} {shell_constant(evaluation_args())} {_BUILD_DIR} --out {{output:q}} > {{log:q}} 2>&1"
)


# One compile job per turn builds its n candidates in parallel on CPU cores.
for _n in sorted({m["n"] for m in METHODS.values()}):

    rule:
        name:
            f"compile_n{_n}"
        input:
            # response.json, beside each candidate.py, is written by the same generate job
            candidates=[turn_cand(c, layout.CANDIDATE) for c in range(_n)],
            # what its build-ahead worker constructs the candidate against (evaluator/build.py)
            reference=res(layout.REFERENCE),
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
        shell:
            COMPILE_TURN


# The inputs Snakemake needs for the order, no more (each input file costs planning
# time; the reference study has ~2,700 evaluations): the candidate's build.json,
# after its candidate.py and the task's reference (the compile job's inputs) and
# its response.json (written with the candidate); `evaluate-candidate` finds
# each of them from the build's place (study/layout.py).
rule evaluate:
    input:
        cand(layout.BUILD),
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
    shell:
        EVALUATE_CANDIDATE
