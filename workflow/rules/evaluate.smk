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
# One job per turn: each candidate on a claimed timing slot, as `gpu-slots run --late`
# around `evaluate-candidate`, then the turn's selection (stages/evaluate_turn.py).
EVALUATE_TURN = (
    f'{ARCH_ENV} "$KERNELSWEEP_PYTHON" -m kernelsweep evaluate-turn --builds {{input.builds:q}} '
    "--turn {wildcards.turn} {params.previous} --goal {params.goal} {params.last} --select {output.select:q} "
    f"--slots {shell_constant(shlex.quote(SLOTS))} --logs {{params.logs:q}} -- "
    f"--precision {{wildcards.precision}} {shell_constant(evaluation_args())} {_BUILD_DIR} > {{log:q}} 2>&1"
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


# One evaluation job per turn (the reference study plans ~2,700 evaluations: one job
# each was most of its planning time). Its inputs are what Snakemake needs for the
# order, no more (each input file costs planning time): the turn's build.json files,
# after their candidate.py and the task's reference (the compile job's inputs) and
# their response.json (written with the candidate), and the previous turn's
# selection; `evaluate-candidate` finds each candidate's files from the build's place
# (study/layout.py).
for _n in sorted({m["n"] for m in METHODS.values()}):

    rule:
        name:
            f"evaluate_n{_n}"
        input:
            unpack(evaluate_inputs),
        output:
            evals=[turn_cand(c, layout.EVAL) for c in range(_n)],
            select=turn(layout.SELECT),
        log:
            cell_log("evaluate", f"{layout.TURN_DIR}.log"),
        benchmark:
            cell_benchmark("evaluate", f"{layout.TURN_DIR}.tsv")
        wildcard_constraints:
            method=methods_with_n(_n),
        conda:
            TIMING_ENV
        resources:
            **TIMING_RESOURCE,
        params:
            previous=lambda w, input: f"--previous {shlex.quote(input.previous)}" if "previous" in input.keys() else "",
            goal=lambda w: method_of(w)["goal"],
            last=lambda w: "--last" if int(w.turn) == method_of(w)["turns"] - 1 else "",
            # each candidate's evaluation log, c<k>.log
            logs=cell_log("evaluate", layout.TURN_DIR),
        shell:
            EVALUATE_TURN
