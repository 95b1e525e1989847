# Stages 4, 5, 8 and the agentic roles: prompt -> generate -> (compile ->
# evaluate, see evaluate.smk) -> select, turn after turn, then final.json per cell.
# Every strategy is the same chain; a method's flags decide which inputs a
# prompt reads (profile, previous selection, analysis, brief, feedback).


def turn_path(template, wildcards, turn, **extra):
    return cell_path(template.replace("{turn}", str(turn)), wildcards, **extra)


def is_agentic(m):
    return m["strategy"] == "agentic"


def prompt_inputs(wildcards):
    m, turn = method_of(wildcards), int(wildcards.turn)
    inputs = {"task": f"{RES}/tasks/{wildcards.task}.json"}
    if m["profile"]:
        inputs["profile"] = f"{RES}/profile/{DEVICE}/{wildcards.task}.json"
    if turn > 0:
        inputs["previous"] = turn_path(TURN + "/select.json", wildcards, turn - 1)
        if is_agentic(m) and m["feedback"]:
            inputs["feedback"] = turn_path(TURN + "/feedback/response.json", wildcards, turn - 1)
    if is_agentic(m) and m["analyzer"]:
        inputs["analysis"] = cell_path(CELL + "/roles/analyzer/response.json", wildcards)
    if is_agentic(m) and m["researcher"]:
        inputs["brief"] = cell_path(CELL + "/roles/researcher/response.json", wildcards)
    return inputs


def prompt_spec(wildcards, role):
    """Everything a prompt builder needs besides its input files."""
    return as_json(
        {
            "role": role,
            "key": {k: getattr(wildcards, k) for k in ("model", "method", "task", "sample", "turn") if hasattr(wildcards, k)},
            "method": method_of(wildcards),
            "model": model_spec(wildcards.model),
            "device": DEVICE,
            "precision": STUDY.config["precision"],
            "corpus": STUDY.config["corpus"],
        }
    )


GENERATE = "{KS} generate --model {wildcards.model} --model-spec {params.model:q} --prompt {input.prompt} --out-dir {params.out_dir}"


rule prompt:
    input:
        unpack(prompt_inputs),
    output:
        TURN + "/prompt.json",
    log:
        cell_log("prompt", "t{turn}.log"),
    params:
        spec=lambda w: prompt_spec(w, "generator"),
        inputs=lambda w, input: as_json(dict(input.items())),
    localrule: True
    shell:
        "{KS} prompt --spec {params.spec:q} --inputs {params.inputs:q} --out {output} > {log} 2>&1"


# One generate rule per candidate count n: a job writes all n candidates of a
# turn from one batched model call (outputs must be known when the rule is defined).
for _n in sorted({m["n"] for m in METHODS.values()}):

    rule:
        name:
            f"generate_n{_n}"
        input:
            prompt=TURN + "/prompt.json",
            model=model_ready,
        output:
            [CAND.replace("{cand}", str(c)) + f for c in range(_n) for f in ("/response.json", "/candidate.py")],
        log:
            cell_log("generate", "t{turn}.log"),
        benchmark:
            CELL + "/t{turn}/generate.benchmark.tsv"
        wildcard_constraints:
            method=_alternatives(name for name, m in METHODS.items() if m["n"] == _n),
        params:
            model=lambda w: as_json(model_spec(w.model)),
            out_dir=lambda w: cell_path(TURN, w, turn=w.turn),
        shell:
            GENERATE + " > {log} 2>&1"


def role_rule_inputs(role):
    def inputs(wildcards):
        m = method_of(wildcards)
        found = {"task": f"{RES}/tasks/{wildcards.task}.json", "model": model_ready(wildcards)}
        if role == "researcher" and m["analyzer"]:
            found["analysis"] = cell_path(CELL + "/roles/analyzer/response.json", wildcards)
        if role == "feedback":
            found["selection"] = cell_path(TURN + "/select.json", wildcards, turn=wildcards.turn)
        if m["profile"]:
            found["profile"] = f"{RES}/profile/{DEVICE}/{wildcards.task}.json"
        return found

    return inputs


ROLE_SHELL = (
    "({KS} prompt --spec {params.spec:q} --inputs {params.inputs:q} --out {output.prompt} && "
    + GENERATE
    + ") > {log} 2>&1"
)

for _role, _folder in (("analyzer", CELL + "/roles/analyzer"), ("researcher", CELL + "/roles/researcher"), ("feedback", TURN + "/feedback")):

    rule:
        name:
            {"analyzer": "analyze", "researcher": "research", "feedback": "feedback"}[_role]
        input:
            unpack(role_rule_inputs(_role)),
        output:
            prompt=_folder + "/prompt.json",
            response=_folder + "/response.json",
        log:
            _folder.replace(RES + "/runs", RES + "/logs/" + _role) + ".log",
        params:
            spec=lambda w, _role=_role: prompt_spec(w, _role),
            inputs=lambda w, input: as_json({k: v for k, v in input.items() if k != "model"}),
            model=lambda w: as_json(model_spec(w.model)),
            out_dir=lambda w, output: str(Path(output.response).parent),
            prompt=lambda w, output: output.prompt,
        shell:
            ROLE_SHELL.replace("{input.prompt}", "{params.prompt}")


def select_inputs(wildcards):
    m, turn = method_of(wildcards), int(wildcards.turn)
    found = {"evals": [turn_path(CAND, wildcards, turn, cand=c) + "/eval.json" for c in range(m["n"])]}
    if turn > 0:
        found["previous"] = turn_path(TURN + "/select.json", wildcards, turn - 1)
    return found


rule select:
    input:
        unpack(select_inputs),
    output:
        TURN + "/select.json",
    log:
        cell_log("select", "t{turn}.log"),
    params:
        previous=lambda w, input: f"--previous {input.previous}" if "previous" in input.keys() else "",
        goal=lambda w: method_of(w)["goal"],
        last=lambda w: "--last" if int(w.turn) == method_of(w)["turns"] - 1 else "",
    localrule: True
    shell:
        "{KS} select --turn {wildcards.turn} --evals {input.evals} {params.previous} "
        "--goal {params.goal} {params.last} --out {output} > {log} 2>&1"


def final_inputs(wildcards):
    m = method_of(wildcards)
    last = m["turns"] - 1
    found = {
        "selection": turn_path(TURN + "/select.json", wildcards, last),
        "responses": [
            turn_path(CAND, wildcards, t, cand=c) + "/response.json" for t in range(m["turns"]) for c in range(m["n"])
        ],
        "evals": [turn_path(CAND, wildcards, t, cand=c) + "/eval.json" for t in range(m["turns"]) for c in range(m["n"])],
    }
    roles = []
    if is_agentic(m) and m["analyzer"]:
        roles.append(cell_path(CELL + "/roles/analyzer/response.json", wildcards))
    if is_agentic(m) and m["researcher"]:
        roles.append(cell_path(CELL + "/roles/researcher/response.json", wildcards))
    if is_agentic(m) and m["feedback"]:
        roles += [turn_path(TURN + "/feedback/response.json", wildcards, t) for t in range(last)]
    found["roles"] = roles
    return found


rule final:
    input:
        unpack(final_inputs),
    output:
        CELL + "/final.json",
    log:
        cell_log("final", "final.log"),
    localrule: True
    shell:
        "{KS} final --cell {wildcards.model}/{wildcards.method}/{wildcards.task}/{wildcards.sample} "
        "--selection {input.selection} --responses {input.responses} --evals {input.evals} "
        "--roles {input.roles} --out {output} > {log} 2>&1"
