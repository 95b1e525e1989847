"""Seeds: a function of the cell identity only, the same in every process."""

from __future__ import annotations

import subprocess
import sys

from kernelsweep.core.seeds import SEED_BITS, candidate_seeds, derive_seed, seed_for

CELL = ("gemma270m", "agentic", "L2-010", 1, 2)


def test_stable_across_processes():
    # A fresh interpreter with a different hash salt must derive the same seed.
    code = "from kernelsweep.core.seeds import derive_seed; print(derive_seed('gemma270m', 'agentic', 'L2-010', 1, 2, 3))"
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={"PYTHONHASHSEED": salt}).stdout.strip() for salt in ("1", "2")}
    assert outputs == {str(derive_seed(*CELL, 3))}


def test_every_field_matters_and_range():
    base = derive_seed(*CELL, 0)
    variants = [derive_seed("other", *CELL[1:], 0), derive_seed(CELL[0], "zero_shot", *CELL[2:], 0),
                derive_seed(*CELL[:2], "L2-011", *CELL[3:], 0), derive_seed(*CELL[:3], 0, 2, 0),
                derive_seed(*CELL[:4], 3, 0), derive_seed(*CELL, 1), derive_seed(*CELL, 0, role="analyzer")]
    assert len({base, *variants}) == 8
    assert all(0 <= s < 2 ** SEED_BITS for s in [base, *variants])


def test_string_and_int_sample_turn_agree():
    # Snakemake wildcards arrive as strings.
    assert derive_seed("m", "x", "L0-001", "1", "2", 0) == derive_seed("m", "x", "L0-001", 1, 2, 0)


def test_candidate_seeds():
    key = {"model": "m", "method": "x", "task": "L0-001", "sample": 0, "turn": 1, "role": "generator"}
    seeds = candidate_seeds(key, 3, seed_for(key, 0))
    assert seeds == [derive_seed("m", "x", "L0-001", 0, 1, i) for i in range(3)]
    assert candidate_seeds({"task": "ad-hoc"}, 3, 10) == [10, 11, 12]
