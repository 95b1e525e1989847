"""The README's stage table and layout section stay true: each row's rule runs
its command, each subcommand lives in the module named, and every top-level
folder of the repository is named."""

import re
import subprocess
from pathlib import Path

from kernelsweep.commands.cli import SUBCOMMANDS

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def test_stage_table_names_the_real_rules_commands_and_modules():
    rows = [line.split(" | ") for line in _section("Stages").splitlines() if line.startswith("| ") and "`" in line]
    assert len(rows) >= 12
    for stage, rules, command, module in rows:
        command, module = command.strip("`"), module.strip(" |`")
        if command.startswith("kernelsweep "):
            assert SUBCOMMANDS[command.split()[1]][0].split(":")[0] == module, stage  # module[:Class]
        else:  # python -m MODULE ACTION
            assert command.split()[2] == module, stage
        rule_file = re.search(r"\((\w+\.smk)\)", rules)
        text = (REPO / "workflow" / "rules" / rule_file.group(1)).read_text() if rule_file else \
            "".join(p.read_text() for p in (REPO / "workflow" / "rules").glob("*.smk"))
        # rules run `$KERNELSWEEP_PYTHON -m kernelsweep SUBCOMMAND` (or `-m MODULE ACTION`)
        assert "-m " + command.removeprefix("python -m ") in text, stage
        for rule in re.findall(r"`(\w+)(?:_n\{n\})?`", rules):
            assert re.search(rf"(rule {rule}:|\"{rule}\"|f\"{rule}_n)", text), (stage, rule)


def test_layout_names_every_top_level_folder():
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    folders = {path.split("/", 1)[0] for path in tracked.splitlines() if "/" in path}
    layout = _section("Layout")
    missing = [f for f in sorted(folders) if not re.search(rf"^    {re.escape(f)}/", layout, re.M)]
    assert not missing, f"README Layout does not name {missing}"
