"""The study configuration: validation against workflow/schemas/config.schema.yaml,
method presets, and the matrix (precision × model × method × task × sample, with turns and
candidates inside a method). Imported by the Snakefile and by the stages; it
never imports torch, so planning stays fast."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from kernelsweep.models.corpus import MEASURED_BY
from kernelsweep.core.schema import REPO_ROOT, load_schema
from kernelsweep.runtime.taskcode import PRECISIONS

# Every model call has a role: the generator writes candidates; the agentic roles
# (each switched on by the method flag of its name) inform it.
ROLES = ("generator", "analyzer", "researcher", "feedback")
AGENTIC_ROLES = ROLES[1:]

# Each strategy is a preset of flags on the one code path (kernelsweep.prompting.strategies).
# A method's own keys override these; ablations are methods with one flag flipped.
STRATEGY_DEFAULTS: dict[str, dict[str, Any]] = {
    "zero_shot": {"turns": 1, "n": 1, "profile": False, "competence_rule": False,
                  "analyzer": False, "researcher": False, "feedback": False},
    "guided": {"turns": 1, "n": 1, "profile": True, "competence_rule": True,
               "analyzer": False, "researcher": False, "feedback": False},
    "iterative": {"turns": 3, "n": 1, "profile": False, "competence_rule": False,
                  "analyzer": False, "researcher": False, "feedback": False},
    "agentic": {"turns": 3, "n": 4, "temperature": 0.7, "profile": False, "competence_rule": True,
                "analyzer": True, "researcher": True, "feedback": True},
    # The tool-using agent (kernelsweep.agent): one trajectory per cell, with the
    # failure study's guards on; ablations turn a guard, a tool or a cap off.
    "react": {"turns": 1, "n": 1, "profile": False, "competence_rule": False,
              "analyzer": False, "researcher": False, "feedback": False,
              "protocol": "auto", "max_steps": 30, "max_total_tokens": 300000, "wall_s": 3600,
              "editor": True, "run": True, "evaluate": True, "profiler": True, "docs": True,
              "run_timeout_s": 120, "output_chars": 4000,
              "repeat_error": 2, "repeat_error_action": "stop", "force_profile": 2,
              "regression_lock": True, "max_submissions": 4},
}
METHOD_DEFAULTS: dict[str, Any] = {"temperature": None, "max_tokens": None, "goal": "faster", "retrieval_k": 6}


class ConfigError(ValueError):
    """A configuration problem, phrased for the user (names the key and the allowed values)."""


def _key_path(error) -> str:
    parts = [str(p) for p in error.absolute_path]
    return ".".join(parts) if parts else "(top level)"


def _describe(error) -> str:
    where = _key_path(error)
    validator, schema = error.validator, error.schema
    if validator == "enum":
        return f"config key '{where}': {error.instance!r} is not allowed; allowed values: {', '.join(map(repr, schema['enum']))}"
    if validator == "anyOf":  # e.g. precision: a name or a list of names; describe the branch of the value's type
        wrong_type = {e.relative_schema_path[0] for e in error.context if e.validator == "type" and not e.relative_path}
        specific = [e for e in error.context if e.relative_schema_path[0] not in wrong_type]
        if specific:
            return _describe(min(specific, key=lambda e: len(e.absolute_path)))
    if validator == "required":
        return f"config key '{where}': {error.message}"
    if validator == "additionalProperties":
        allowed = ", ".join(sorted(schema.get("properties", {})))
        return f"config key '{where}': {error.message}; allowed keys: {allowed}"
    if validator in ("type", "minimum", "maximum", "exclusiveMinimum", "minItems", "minProperties", "pattern", "oneOf"):
        hint = f" ({schema['description']})" if isinstance(schema, dict) and "description" in schema else ""
        return f"config key '{where}': {error.message}{hint}"
    return f"config key '{where}': {error.message}"


def _apply_defaults(instance: Any, schema: Mapping[str, Any], root: Mapping[str, Any]) -> None:
    """Fill schema defaults into objects (what snakemake.utils.validate(set_default=True) does,
    but also through $ref so method and model entries get theirs)."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        schema = root["$defs"][name]
    if not isinstance(instance, dict):
        return
    for key, sub in schema.get("properties", {}).items():
        if key not in instance and "default" in sub:
            instance[key] = copy.deepcopy(sub["default"])
        if key in instance:
            _apply_defaults(instance[key], sub, root)
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        for key, value in instance.items():
            if key not in schema.get("properties", {}):
                _apply_defaults(value, extra, root)


def _model_problems(models: Mapping[str, Any]) -> list[str]:
    """What the schema cannot say about a model entry (kernelsweep.models.spec: rules that span keys)."""
    from kernelsweep.models.base import ModelSetupError
    from kernelsweep.models.spec import normalise

    problems = []
    for name, spec in models.items():
        try:
            normalise(name, spec)
        except ModelSetupError as e:
            problems.append(f"config key 'models.{name}': {e}")
    return problems


def validate_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate and return a copy with defaults filled in and methods resolved.
    Raises ConfigError listing every problem, each naming its key."""
    import jsonschema

    schema = load_schema()
    config = copy.deepcopy(dict(config))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    lines = [_describe(e) for e in errors]
    lines += _react_conflicts(config.get("methods") or {})
    lines += _corpus_conflicts(config.get("models") or {}, config.get("methods") or {},
                               (config.get("baseline") or {}).get("modes"))
    if config.get("timing_devices") and config.get("device") != "cuda":
        lines.append("config key 'timing_devices': lists GPUs for timing, but device is "
                     f"{config.get('device')!r}; remove it or set device: cuda")
    lines += [f"config key 'models.{name}': a precision's name; runs/{name}/ is that precision's folder"
              for name in (config.get("models") or {}) if name in PRECISIONS]
    if not lines:
        lines = _model_problems(config["models"])
    if lines:
        raise ConfigError("invalid configuration:\n  - " + "\n  - ".join(dict.fromkeys(lines)))
    _apply_defaults(config, schema, schema)
    config["precision"] = precisions_of(config["precision"])
    config["methods"] = {name: resolve_method(name, spec) for name, spec in config["methods"].items()}
    return config


def precisions_of(value: str | list[str]) -> list[str]:
    """The config's `precision` as the list of the study's precisions (a single name is a list of one)."""
    return [value] if isinstance(value, str) else list(value)


def _react_conflicts(methods: Mapping[str, Any]) -> list[str]:
    """Guard settings that need a tool the method switched off."""
    lines = []
    for name, spec in methods.items():
        if not isinstance(spec, dict) or spec.get("strategy") != "react":
            continue
        flags = resolve_method(name, spec)
        if flags["force_profile"] and not flags["profiler"]:
            lines.append(f"config key 'methods.{name}.force_profile': needs the profiler tool; "
                         "set profiler: true or force_profile: null")
    return lines


def _corpus_conflicts(models: Mapping[str, Any], methods: Mapping[str, Any], modes: list[str] | None) -> list[str]:
    """A corpus holds one candidate per task: every method of its study must ask for one;
    the claim it judges needs its baseline measured."""
    corpora = [name for name, spec in models.items() if isinstance(spec, dict) and spec.get("backend") == "corpus"]
    lines = []
    for name in corpora:
        mode = MEASURED_BY.get(models[name].get("baseline", "eager"))
        if mode and mode != "eager" and modes is not None and mode not in modes:
            lines.append(f"config key 'models.{name}.baseline': judges the claim over {models[name]['baseline']}, "
                         f"but baseline.modes does not measure {mode}; add it to baseline.modes")
    for name, spec in methods.items():
        if not corpora or not isinstance(spec, dict) or spec.get("strategy") not in STRATEGY_DEFAULTS:
            continue
        flags = resolve_method(name, spec)
        if flags["turns"] != 1 or flags["n"] != 1 or flags["strategy"] in ("agentic", "react"):
            lines.append(f"config key 'methods.{name}': model(s) {', '.join(corpora)} read a corpus, one candidate "
                         "per task; every method of the study must be one turn of one candidate (strategy zero_shot); "
                         "run the corpus in a study of its own")
    return lines


def resolve_method(name: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    """A method's flags: strategy preset, then generic defaults, then the method's own keys.
    The agentic roles run only in the agentic strategy, so elsewhere their flags resolve
    to false (the workflow and the prompts read each flag as is)."""
    method = {**METHOD_DEFAULTS, **STRATEGY_DEFAULTS[spec["strategy"]], **spec}
    if method["strategy"] != "agentic":
        method.update(dict.fromkeys(AGENTIC_ROLES, False))
    return method


@dataclass(frozen=True)
class Study:
    """The resolved configuration plus the matrix it spans."""

    config: dict[str, Any]
    task_ids: tuple[str, ...]

    @property
    def results(self) -> str:
        return self.config["results"].rstrip("/")

    @property
    def device(self) -> str:
        return self.config["device"]

    @property
    def models(self) -> list[str]:
        return list(self.config["models"])

    @property
    def methods(self) -> dict[str, dict[str, Any]]:
        return self.config["methods"]

    @property
    def precisions(self) -> list[str]:
        """The study's precisions, an axis like models and methods (validate_config makes it a list)."""
        return precisions_of(self.config["precision"])

    @property
    def samples(self) -> int:
        return int(self.config["samples"])

    def cells(self) -> list[dict[str, Any]]:
        return [
            {"precision": p, "model": m, "method": meth, "task": t, "sample": s}
            for p in self.precisions for m in self.models for meth in self.methods
            for t in self.task_ids for s in range(self.samples)
        ]

    def build_cache(self) -> str:
        return self.config.get("build_cache") or f"{self.results}/build"


def load_study(config: Mapping[str, Any], repo_root: Path | str = REPO_ROOT) -> Study:
    """Validate the config and plan the task ids (no network)."""
    from kernelsweep.tasks import plan_task_ids

    from kernelsweep.models import replay

    resolved = validate_config(config)
    for spec in resolved["models"].values():  # jobs may run in another folder: the path they read, absolute
        if spec.get("backend") in ("replay", "corpus") and spec.get("path"):
            spec["path"] = str(replay.resolve_path(spec["path"], repo_root))
    task_ids = tuple(plan_task_ids(resolved["tasks"], Path(repo_root)))
    if not task_ids:
        raise ConfigError("config key 'tasks': the selection matches no task")
    _check_corpora(resolved["models"], task_ids)
    return Study(config=resolved, task_ids=task_ids)


def _check_corpora(models: Mapping[str, Any], task_ids: tuple[str, ...]) -> None:
    """Each corpus reads as its format says and has a row for every task of the study
    (before any job: a missing row would fail that task's generation)."""
    from kernelsweep.models.corpus import CorpusError, read

    for name, spec in models.items():
        if spec.get("backend") != "corpus":
            continue
        try:
            rows = read(spec["path"], spec["format"])
        except CorpusError as e:
            raise ConfigError(f"config key 'models.{name}': {e}") from None
        missing = [t for t in task_ids if t not in rows]
        if missing:
            shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
            raise ConfigError(f"config key 'models.{name}': the corpus {spec['path']} has no row for {len(missing)} "
                              f"of the study's {len(task_ids)} tasks ({shown}); select only its tasks (tasks.ids)")
