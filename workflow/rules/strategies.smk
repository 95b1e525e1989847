# Stages 4, 5, 8 and the agentic roles: prompt + generate (one job, two
# products) -> (compile -> evaluate and select, see evaluate.smk), turn after
# turn, then final.json per cell. Every strategy is this one chain; a method's flags decide which inputs
# a prompt reads (profile, previous selection, analysis, brief, feedback).

PROMPT_THEN_GENERATE = (
    '"$KERNELSWEEP_PYTHON" -m kernelsweep prompt --spec {params.spec:q} --inputs {params.inputs:q} --out {params.prompt:q} > {log:q} 2>&1 && '
    '"$KERNELSWEEP_PYTHON" -m kernelsweep generate --model {wildcards.model} --model-spec {params.model:q} '
    "--prompt {params.prompt:q} --out-dir {params.out_dir:q} >> {log:q} 2>&1"
)


# One generate rule per candidate count n: a job builds the turn's prompt and
# writes all n candidates from one batched model call (a rule's outputs are
# fixed when it is defined, hence one rule per n).
for _n in sorted({m["n"] for m in METHODS.values()}):

    rule:
        name:
            f"generate_n{_n}"
        input:
            unpack(generator_inputs),
        output:
            prompt=turn(layout.PROMPT),
            candidates=[turn_cand(c, name) for c in range(_n) for name in (layout.RESPONSE, layout.CANDIDATE)],
        log:
            cell_log("generate", f"{layout.TURN_DIR}.log"),
        benchmark:
            cell_benchmark("generate", f"{layout.TURN_DIR}.tsv")
        wildcard_constraints:
            method=methods_with_n(_n),
        priority: MODEL_CALL_PRIORITY
        conda:
            GEN_ENV
        params:
            spec=lambda w: prompt_spec(w, "generator"),
            inputs=lambda w, input: prompt_inputs(input),
            model=lambda w: MODEL_SPECS[w.model],
            # paths as strings with wildcards, not functions of the output: the same values, planned faster
            prompt=turn(layout.PROMPT),
            out_dir=str(Path(turn(layout.PROMPT)).parent),
        shell:
            PROMPT_THEN_GENERATE


# The agentic roles: build the role's prompt, then make its one model call.
for _role, _rule_name in (("analyzer", "analyze"), ("researcher", "research"), ("feedback", "feedback")):

    rule:
        name:
            _rule_name
        input:
            unpack(role_rule_inputs(_role)),
        output:
            prompt=role_file(_role, layout.PROMPT),
            response=role_file(_role, layout.RESPONSE),
        log:
            cell_log(_role, f"{layout.TURN_DIR}.log" if _role == "feedback" else "role.log"),
        benchmark:
            cell_benchmark(_role, f"{layout.TURN_DIR}.tsv" if _role == "feedback" else "role.tsv")
        priority: MODEL_CALL_PRIORITY
        conda:
            GEN_ENV
        params:
            spec=lambda w, _role=_role: prompt_spec(w, _role),
            inputs=lambda w, input: prompt_inputs(input),
            model=lambda w: MODEL_SPECS[w.model],
            prompt=role_file(_role, layout.PROMPT),
            out_dir=str(Path(role_file(_role, layout.RESPONSE)).parent),
        shell:
            PROMPT_THEN_GENERATE


rule retire_outage_record:
    """An earlier version's outage record, moved to the same path under {results}/stale/
    (retired_inputs, common.smk): the job that wrote it then makes the call again."""
    output:
        res(f"{layout.STALE}/{{record}}"),
    log:
        res("logs/retire_outage_record/{record}.log"),
    wildcard_constraints:
        record=rf"{layout.RUNS}/.+/{re.escape(layout.RESPONSE)}",
    localrule: True
    run:
        move_outage_record(wildcards.record, log[0])


rule final:
    input:
        unpack(final_inputs),
    output:
        cell(layout.FINAL),
    log:
        cell_log("final", "final.log"),
    localrule: True
    conda:
        CPU_ENV
    params:
        turns=lambda w: method_of(w)["turns"],
        cands=lambda w: method_of(w)["n"],
    shell:
        '"$KERNELSWEEP_PYTHON" -m kernelsweep final --selection {input.selection:q} --turns {params.turns} '
        "--cands {params.cands} --roles {input.roles:q} --out {output:q} > {log:q} 2>&1"
