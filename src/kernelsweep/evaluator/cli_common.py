"""Pieces the three evaluator subcommands share: argument types, printing a
record and writing it atomically."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kernelsweep import fileio


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {value}")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def emit(command: str, record: dict[str, Any], out: Path | None) -> int:
    """Print the record as JSON; write it to OUT atomically when asked."""
    text = fileio.dumps(record)
    if out is not None:
        try:
            fileio.write_atomic(out, text)
        except OSError as exc:
            print(f"kernelsweep {command}: cannot write {out}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    sys.stdout.write(text)
    sys.stdout.flush()
    return 0


def fail(command: str, message: str) -> int:
    print(f"kernelsweep {command}: {message}", file=sys.stderr)
    return 2
