# Models: the embedded checkpoint is prepared once; every generate job of a
# model waits for it. Models served by a local server are started in onstart.

PREPARED_MARKER = ".kernelsweep-prepared"


def model_spec(name):
    return STUDY.config["models"][name]


def model_ready(wildcards):
    """The prepared-checkpoint marker a generate job needs, if any."""
    spec = model_spec(wildcards.model)
    if spec.get("prepare") == "embedded":
        return [f"{spec['path']}/{PREPARED_MARKER}"]
    return []


_PREPARED = sorted({s["path"] for s in STUDY.config["models"].values() if s.get("prepare") == "embedded"})

if _PREPARED:

    rule prepare_model:
        output:
            "{checkpoint}/" + PREPARED_MARKER,
        log:
            RES + "/logs/prepare_model/{checkpoint}.log",
        wildcard_constraints:
            checkpoint=_alternatives(_PREPARED),
        shell:
            "{KS} prepare-model --out {wildcards.checkpoint} > {log} 2>&1"
