"""The docs stay true where a machine can tell: every file the architecture page,
the decision records and the GPU-machine page name exists, every function or
class the architecture page names next to its file is defined there, each
decision record has its four parts and is indexed, each measurement is data
with a date, a machine and a command, and nothing points at a running log."""

from __future__ import annotations

import csv
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PACKAGE = REPO / "src" / "kernelsweep"
DECISIONS = DOCS / "decisions"
MEASUREMENTS = DOCS / "measurements"
# Where a bare path in the docs is looked for, in order.
ROOTS = (REPO, PACKAGE, PACKAGE / "evaluator", REPO / "workflow" / "rules", DOCS)
PATH = re.compile(r"`([\w./-]+\.(?:py|smk|md|csv|yaml|sh)|Snakefile)`")
# `file.py` (`name` ...) or `file.py`: `name`: NAME is defined in FILE.
NAMED = re.compile(r"`([\w/.-]+\.py)`(?::\s*|\s*\()`([\w.]+)`")


def _pages() -> list[Path]:
    return [DOCS / "architecture.md", DOCS / "gpu-machine.md", MEASUREMENTS / "README.md",
            *sorted(DECISIONS.glob("*.md"))]


def _find(name: str, here: Path | None = None) -> Path | None:
    for root in ((here,) if here else ()) + ROOTS:
        if (root / name).exists():
            return root / name
    return None


@pytest.mark.parametrize("page", _pages(), ids=lambda p: str(p.relative_to(DOCS)))
def test_every_named_file_exists(page):
    missing = sorted({name for name in PATH.findall(page.read_text(encoding="utf-8")) if _find(name, page.parent) is None})
    assert not missing, f"{page.relative_to(REPO)} names files that do not exist: {missing}"


def test_the_architecture_names_functions_where_they_are_defined():
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    pairs = NAMED.findall(text)
    assert len(pairs) >= 30, "the architecture page points at functions next to their files"
    wrong = []
    for file, name in pairs:
        path = _find(file)
        if path is None:
            wrong.append(f"{file} (no such file)")
            continue
        source = path.read_text(encoding="utf-8")
        for part in name.split("."):
            if not re.search(rf"^\s*(?:def|class)\s+{re.escape(part)}\b|^\s*{re.escape(part)}\s*[:=]", source, re.M):
                wrong.append(f"{file}: {name}")
                break
    assert not wrong, f"named in docs/architecture.md but not defined there: {wrong}"


def test_every_subcommand_module_on_the_architecture_page_is_real():
    from kernelsweep.commands.cli import SUBCOMMANDS

    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    for command in re.findall(r"`([a-z][a-z-]+)` \(`[\w/.]+", text):
        if command in SUBCOMMANDS:
            module = SUBCOMMANDS[command][0].split(":")[0]
            assert (REPO / "src" / (module.replace(".", "/") + ".py")).exists() or \
                (REPO / "src" / module.replace(".", "/") / "__init__.py").exists(), command


def test_each_decision_has_its_parts_and_is_indexed():
    index = (DECISIONS / "README.md").read_text(encoding="utf-8")
    records = sorted(p for p in DECISIONS.glob("*.md") if p.name != "README.md")
    assert records
    for record in records:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}-[a-z0-9-]+\.md", record.name), record.name
        text = record.read_text(encoding="utf-8")
        for part in ("**Context.**", "**Decision.**", "**Measured reason.**", "**Measure again.**"):
            assert part in text, f"{record.name} lacks {part}"
        assert f"({record.name})" in index, f"{record.name} is not in docs/decisions/README.md"
        assert record.name[:10] in text.splitlines()[0], f"{record.name}: the title carries the date"


def test_measurements_are_data_with_date_machine_and_command():
    files = sorted(MEASUREMENTS.glob("*.csv"))
    assert files
    listed = (MEASUREMENTS / "README.md").read_text(encoding="utf-8")
    for path in files:
        assert f"`{path.name}`" in listed, f"{path.name} is not described in docs/measurements/README.md"
        rows = list(csv.reader(path.open(encoding="utf-8")))
        header, body = rows[0], rows[1:]
        assert header[:3] == ["date", "machine", "command"], path.name
        assert body, path.name
        for row in body:
            assert len(row) == len(header), (path.name, row)
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", row[0]) and row[1] and row[2], (path.name, row)


def test_no_running_log_and_nothing_points_at_one():
    assert not (DOCS / "gpu-notes.md").exists()
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    pointing = [name for name in tracked.splitlines()
                if name != "tests/test_docs.py" and (REPO / name).is_file()
                and "gpu-notes" in (REPO / name).read_text(encoding="utf-8", errors="replace")]
    assert not pointing, f"these files point at the removed log docs/gpu-notes.md: {pointing}"


def test_every_pointer_into_docs_exists():
    """Code comments, scripts and docs that cite a doc (a decision, a measurement) cite one that is there."""
    tracked = subprocess.run(["git", "ls-files", "src", "workflow", "scripts", "benchmarks", "docs", "README.md",
                              "config", "Snakefile"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    broken = set()
    for name in tracked.splitlines():
        path = REPO / name
        if path.is_file() and path.suffix in (".py", ".smk", ".sh", ".md", ".yaml", "") and name != "tests/test_docs.py":
            for cited in re.findall(r"\bdocs/[\w/.-]+\.(?:md|csv)", path.read_text(encoding="utf-8", errors="replace")):
                if not (REPO / cited).exists():
                    broken.add(f"{name}: {cited}")
    assert not broken, f"pointers to docs that do not exist: {sorted(broken)}"
