"""Imports go one way: the layers of kernelsweep, read from the source (ast, nothing
imported). A unit is a top-level module or subpackage of kernelsweep; a unit may
import only units of a lower layer, so no two units import each other, however
lazily (imports inside functions count). A new module goes into LAYERS."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "kernelsweep"

# Lowest first. Each layer may import the layers before it, never its own or a later one.
LAYERS: list[tuple[str, set[str]]] = [
    ("core: the shared vocabulary (categories, metrics, seeds, shapes, files, the config schema)", {"core"}),
    ("runtime: child processes, device slots, how a child loads task code", {"runtime"}),
    ("one concern each: judge a candidate, profile a reference, call a model, find tasks",
     {"evaluator", "profiling", "models", "tasks"}),
    ("the study: validated config and matrix, the run layout, results already on disk", {"study"}),
    ("what a model is asked (prompts) and what a study found (report)", {"prompting", "report"}),
    ("the workflow's stages and the react agent", {"stages", "agent"}),
    ("commands: every subcommand, the pre-flight check, the config docs", {"commands"}),
    ("python -m kernelsweep", {"__main__"}),
]
LAYER_OF = {unit: i for i, (_, units) in enumerate(LAYERS) for unit in units}
# Not kernelsweep code: data that ships with the package.
DATA = {"demo_tasks"}


def unit_of(module: str) -> str:
    """kernelsweep.report.react -> report; kernelsweep.study.layout -> layout."""
    return module.split(".")[1]


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, package: Path = PACKAGE) -> set[str]:
    """Every kernelsweep module or name `path` imports, at any depth, relative imports resolved."""
    module = module_name(path, package)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            # `from kernelsweep import layout` imports the unit layout: name the members too
            found.update([base] + [f"{base}.{alias.name}" for alias in node.names])
    return {name for name in found if name.startswith("kernelsweep.")}


def unit_edges() -> dict[tuple[str, str], str]:
    """(importer, imported) unit -> one example, `module -> module`."""
    units = set(LAYER_OF) | DATA
    edges = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = module_name(path)
        if module == "kernelsweep" or unit_of(module) in DATA:
            continue
        for name in sorted(imported(path)):
            if unit_of(name) in units and unit_of(name) != unit_of(module):
                edges.setdefault((unit_of(module), unit_of(name)), f"{module} -> {name}")
    return edges


def test_every_unit_has_a_layer():
    units = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").is_file()}
    assert units - set(LAYER_OF) - DATA == set(), "put the new module in LAYERS (tests/test_import_directions.py)"
    assert set(LAYER_OF) - units == set(), "LAYERS names a module that is gone"


def test_no_import_cycle_between_units():
    graph: dict[str, set[str]] = {}
    for a, b in unit_edges():
        graph.setdefault(a, set()).add(b)

    def cycle_from(start, path):
        for nxt in sorted(graph.get(path[-1], ())):
            if nxt == start:
                return path + [nxt]
            if nxt not in path and (found := cycle_from(start, path + [nxt])):
                return found
        return None

    cycles = [c for unit in sorted(graph) if (c := cycle_from(unit, [unit]))]
    assert not cycles, "import cycle: " + " -> ".join(cycles[0])


@pytest.mark.parametrize("importer", sorted(LAYER_OF))
def test_imports_go_down_the_layers(importer):
    upward = [f"{example} (layer '{LAYERS[LAYER_OF[b]][0]}' is not below '{LAYERS[LAYER_OF[a]][0]}')"
              for (a, b), example in unit_edges().items() if a == importer and LAYER_OF[b] >= LAYER_OF[a]]
    assert not upward, "\n".join(upward)


def test_the_reader_sees_lazy_and_relative_imports(tmp_path):
    source = tmp_path / "kernelsweep" / "report" / "x.py"
    source.parent.mkdir(parents=True)
    source.write_text("def f():\n    from ..agent import cell\n    import kernelsweep.stages.final\n")
    found = imported(source, tmp_path / "kernelsweep")
    assert {"kernelsweep.agent", "kernelsweep.agent.cell", "kernelsweep.stages.final"} <= found


# The evaluator's trust boundary (docs/architecture.md, "The trust boundary"): the
# parent's modules never import the worker side, which imports of the parent's only these.
UNTRUSTED = "kernelsweep.evaluator.untrusted"
PURE_FOR_WORKERS = {"kernelsweep.evaluator.settings", "kernelsweep.evaluator.compare",
                    "kernelsweep.evaluator.diagnostics"}


def test_the_trusted_side_never_imports_the_untrusted_side():
    found = [f"{module_name(path)} -> {name}" for path in sorted((PACKAGE / "evaluator").rglob("*.py"))
             if not module_name(path).startswith(UNTRUSTED)
             for name in sorted(imported(path)) if name.startswith(UNTRUSTED)]
    assert not found, found


def test_the_untrusted_side_imports_only_pure_parent_modules():
    found = []
    for path in sorted((PACKAGE / "evaluator" / "untrusted").rglob("*.py")):
        for name in sorted(imported(path)):
            if name.startswith("kernelsweep.evaluator") and not name.startswith(UNTRUSTED) \
                    and name not in PURE_FOR_WORKERS | {"kernelsweep.evaluator"}:
                found.append(f"{module_name(path)} -> {name}")
    assert not found, found
