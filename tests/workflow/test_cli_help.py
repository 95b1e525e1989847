"""Every `kernelsweep` subcommand answers --help (its module imports and its parser builds)."""

import subprocess
import sys

import pytest

from kernelsweep.commands.cli import SUBCOMMANDS


@pytest.mark.parametrize("command", sorted(SUBCOMMANDS))
def test_subcommand_help(command):
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", command, "--help"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: kernelsweep {command}")


def test_top_level_help_lists_every_subcommand():
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for command in SUBCOMMANDS:
        assert command in proc.stdout


def test_unknown_subcommand_is_a_usage_error():
    proc = subprocess.run([sys.executable, "-m", "kernelsweep", "frobnicate"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr
