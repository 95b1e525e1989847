"""How many timed calls make a block: their inputs are made before the block
and the candidate keeps a clone of each output until it ends, so both count
against the device's timing budget (an honest matmul with 4 GiB outputs and
16 MiB inputs ran out of memory on the H200 when blocks were sized by inputs)."""

from __future__ import annotations

from kernelsweep.evaluator import settings
from kernelsweep.evaluator.judge.timing import BLOCK_CALLS, block_calls

GIB, MIB = 1 << 30, 1 << 20


def test_small_calls_fill_a_block():
    assert block_calls("cuda", 16 * MIB, 16 * MIB) == BLOCK_CALLS["cuda"]
    assert block_calls("cpu", 1 * MIB, 1 * MIB) == BLOCK_CALLS["cpu"]


def test_big_outputs_shrink_the_block_like_big_inputs():
    budget = settings.TIMING_POOL_BYTES["cuda"]
    by_outputs = block_calls("cuda", 16 * MIB, budget // 3)
    by_inputs = block_calls("cuda", budget // 3, 16 * MIB)
    assert by_outputs == by_inputs == 2
    assert by_outputs * (16 * MIB + budget // 3) <= budget


def test_a_call_beyond_the_budget_still_gets_a_block_of_one():
    assert block_calls("cuda", 16 * MIB, 4 * GIB) == 1
    assert block_calls("cuda", 0, 0) == BLOCK_CALLS["cuda"]
