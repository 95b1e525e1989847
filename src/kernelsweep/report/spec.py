"""The study description the report reads (STUDY.json, written by the Snakemake
report rule from the resolved config): which cells were expected, what each
method is, and which methods form the component ablation and the best-of-n sweep."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from kernelsweep.evaluator.settings import BASELINE_MODES as DEFAULT_BASELINE_MODES
from kernelsweep.evaluator.settings import COMPILE_MODES


class ReportInputError(ValueError):
    """A problem with the report's inputs, phrased for the user (names the file and key)."""


@dataclass(frozen=True)
class Task:
    id: str
    level: int
    name: str


@dataclass(frozen=True)
class Ablation:
    method: str
    change: str  # e.g. "without researcher", "single turn"


@dataclass(frozen=True)
class StudySpec:
    device: str
    precisions: tuple[str, ...]  # the study's precisions, an axis; `at` gives one precision's slice
    models: dict[str, dict[str, Any]]
    methods: dict[str, dict[str, Any]]
    tasks: tuple[Task, ...]
    samples: int
    baseline_modes: tuple[str, ...] = DEFAULT_BASELINE_MODES
    ablation_base: str | None = None
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def precision(self) -> str:
        """The precision of a study (or a slice, `at`) of one precision."""
        if len(self.precisions) != 1:
            raise ValueError(f"the study has {len(self.precisions)} precisions; take one with at()")
        return self.precisions[0]

    def at(self, precision: str) -> StudySpec:
        """The study restricted to one of its precisions."""
        if precision not in self.precisions:
            raise ValueError(f"{precision!r} is not a precision of the study ({', '.join(self.precisions)})")
        return replace(self, precisions=(precision,))

    @property
    def task_scale(self) -> float:
        """tasks.scale: the factor on every task's size constants (1: the tasks as written)."""
        return float((self.config.get("tasks") or {}).get("scale") or 1.0)

    @property
    def shape_variants(self) -> int:
        """The shape variants a candidate must be correct on (kernelsweep.core.shapes); 0 for a manifest older than them."""
        return int((self.config.get("evaluation") or {}).get("shape_variants", 0))

    @property
    def tolerance(self) -> str | None:
        """The study's tolerance profile (evaluator settings.TOLERANCE_PROFILES); None for a manifest older than them."""
        return (self.config.get("evaluation") or {}).get("tolerance")

    @property
    def equivalence_margin(self) -> float:
        """The study's tie margin (kernelsweep.core.metrics); 0 for a manifest older than it."""
        return float((self.config.get("evaluation") or {}).get("equivalence_margin", 0.0))

    @property
    def other_modes(self) -> tuple[str, ...]:
        """The baselines a candidate is compared with through eager (every baseline mode but eager)."""
        return tuple(m for m in self.baseline_modes if m != "eager")

    @property
    def compile_modes(self) -> tuple[str, ...]:
        """The torch.compile baselines among them (the fastest is the report's "torch.compile")."""
        return tuple(m for m in self.baseline_modes if m in COMPILE_MODES)

    @property
    def levels(self) -> list[int]:
        return sorted({t.level for t in self.tasks})

    def model_label(self, model: str) -> str:
        """A model's name as the report shows it: `NAME (recorded)` for hand-written
        responses (a replay entry with `recorded: true`), so they are never read as a model's."""
        entry = self.models.get(model) or {}
        return f"{model} (recorded)" if isinstance(entry, dict) and entry.get("recorded") else model

    def task(self, task_id: str) -> Task:
        return self._tasks_by_id[task_id]

    @cached_property
    def _tasks_by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}

    def expected_cells(self) -> list[tuple[str, str, str, int]]:
        """(model, method, task, sample) for every cell of the matrix, in a stable order (at each precision)."""
        return [(model, method, task.id, s)
                for model in self.models for method in self.methods
                for task in self.tasks for s in range(self.samples)]

    def component_ablations(self) -> list[Ablation]:
        """Agentic methods that differ from the base in exactly one on/off flag, or
        only in running a single turn."""
        base = self._agentic_base()
        if base is None:
            return []
        found = []
        for name, spec in self.methods.items():
            diff = _differing_keys(base, spec)
            if name == self.ablation_base or not _is_agentic(spec) or len(diff) != 1:
                continue
            (key,) = diff
            if key == "turns" and spec.get("turns") == 1:
                found.append(Ablation(name, "single turn"))
            elif isinstance(base.get(key), bool) and isinstance(spec.get(key), bool):
                found.append(Ablation(name, f"{'without' if base[key] else 'with'} {key}"))
        return found

    def best_of_n_sweep(self) -> list[tuple[int, str]]:
        """(n, method) for the base and every agentic method that differs from it only
        in n, sorted by n. Empty when there is no base or no such method."""
        base = self._agentic_base()
        if base is None:
            return []
        sweep = {int(base.get("n", 1)): self.ablation_base}
        for name, spec in self.methods.items():
            if name != self.ablation_base and _is_agentic(spec) and _differing_keys(base, spec) == {"n"}:
                sweep.setdefault(int(spec["n"]), name)
        return sorted(sweep.items()) if len(sweep) > 1 else []

    def unclassified_variants(self) -> dict[str, list[str]]:
        """Agentic methods that are neither the base, an ablation nor a best-of-n
        point, with the keys in which they differ (reported, so nothing is dropped silently)."""
        base = self._agentic_base()
        if base is None:
            return {}
        used = {a.method for a in self.component_ablations()} | {m for _, m in self.best_of_n_sweep()}
        return {name: sorted(_differing_keys(base, spec)) for name, spec in self.methods.items()
                if _is_agentic(spec) and name != self.ablation_base and name not in used}

    def ablation_status(self) -> str | None:
        """Why there is no ablation base, or None when there is one."""
        if not self.ablation_base:
            return "no ablation base is configured"
        if self.ablation_base not in self.methods:
            return f"the ablation base '{self.ablation_base}' is not a method of this study"
        if not _is_agentic(self.methods[self.ablation_base]):
            return f"the ablation base '{self.ablation_base}' is not an agentic method"
        return None

    def _agentic_base(self) -> dict[str, Any] | None:
        base = self.methods.get(self.ablation_base or "")
        return base if base is not None and _is_agentic(base) else None


def _is_agentic(spec: Mapping[str, Any]) -> bool:
    return spec.get("strategy") == "agentic"


def _differing_keys(a: Mapping[str, Any], b: Mapping[str, Any]) -> set[str]:
    return {k for k in set(a) | set(b) if a.get(k) != b.get(k)}


def _require(data: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in data:
        raise ReportInputError(f"{where}: missing key '{key}'")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise ReportInputError(f"{where}: key '{key}' must be a {names}, got {type(value).__name__}")
    return value


def parse_study(data: Any, where: str = "study") -> StudySpec:
    """Validate a study description (see the module docstring) and build a StudySpec."""
    if not isinstance(data, dict):
        raise ReportInputError(f"{where}: expected a JSON object at the top level")
    models = _require(data, "models", dict, where)
    methods = _require(data, "methods", dict, where)
    if not models:
        raise ReportInputError(f"{where}: 'models' is empty; the study has no model")
    if not methods:
        raise ReportInputError(f"{where}: 'methods' is empty; the study has no method")
    for name, spec in methods.items():
        if not isinstance(spec, dict) or "strategy" not in spec:
            raise ReportInputError(f"{where}: method '{name}' must be an object with a 'strategy'")
    tasks = []
    for i, entry in enumerate(_require(data, "tasks", list, where)):
        if not isinstance(entry, dict):
            raise ReportInputError(f"{where}: tasks[{i}] must be an object with 'id' and 'level'")
        task_id = _require(entry, "id", str, f"{where}: tasks[{i}]")
        level = _require(entry, "level", int, f"{where}: tasks[{i}] ({task_id})")
        tasks.append(Task(task_id, level, str(entry.get("name") or task_id)))
    if not tasks:
        raise ReportInputError(f"{where}: 'tasks' is empty; the study has no task")
    duplicates = sorted({t.id for t in tasks if [u.id for u in tasks].count(t.id) > 1})
    if duplicates:
        raise ReportInputError(f"{where}: task ids listed more than once: {', '.join(duplicates)}")
    samples = data.get("samples", 1)
    if not isinstance(samples, int) or isinstance(samples, bool) or samples < 1:
        raise ReportInputError(f"{where}: 'samples' must be a positive integer, got {samples!r}")
    modes = data.get("baseline_modes", list(DEFAULT_BASELINE_MODES))
    if not isinstance(modes, list) or not all(isinstance(m, str) for m in modes):
        raise ReportInputError(f"{where}: 'baseline_modes' must be a list of mode names")
    precisions = data.get("precisions", data.get("precision", "fp32"))  # "precision": a manifest from before
    precisions = [precisions] if isinstance(precisions, str) else precisions
    if not isinstance(precisions, list) or not precisions or not all(isinstance(p, str) for p in precisions):
        raise ReportInputError(f"{where}: 'precisions' must be a non-empty list of precision names")
    base = data.get("ablation_base")
    if base is not None and not isinstance(base, str):
        raise ReportInputError(f"{where}: 'ablation_base' must be a method name")
    return StudySpec(
        device=_require(data, "device", str, where),
        precisions=tuple(dict.fromkeys(precisions)),
        models=models,
        methods=methods,
        tasks=tuple(tasks),
        samples=samples,
        baseline_modes=tuple(modes),
        ablation_base=base,
        config=data.get("config") or {},
    )


def load_study(path: str | Path) -> StudySpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportInputError(f"study file not found: {path}") from None
    except OSError as e:
        raise ReportInputError(f"cannot read study file {path}: {e.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ReportInputError(f"study file {path} is not valid JSON: {e.msg} "
                               f"(line {e.lineno}, column {e.colno})") from None
    return parse_study(data, where=str(path))
