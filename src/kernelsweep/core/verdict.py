"""The failure taxonomy and the selection order: one definition, used by the
evaluator, the strategies (select) and the report.

Categories are listed in precedence order: when several apply, the first wins.
Each is documented with an example in docs/taxonomy.md.
"""

from __future__ import annotations

from typing import Any, Mapping

CATEGORIES: tuple[str, ...] = (
    "no_code",          # the response held no code at all
    "syntax_error",     # Python could not parse the candidate
    "interface_error",  # no ModelNew, or its constructor / forward signature does not fit
    "hallucinated_api", # a header, module, attribute or symbol that does not exist
    "compile_error",    # the extension failed to build for another reason
    "timeout",          # killed at the hard wall-clock limit (compile or run)
    "crash",            # the child died by a signal or aborted (segfault, illegal access)
    "out_of_memory",    # device or host allocation failed
    "runtime_error",    # an exception while constructing or running ModelNew
    "shape_mismatch",   # an output of the wrong shape, dtype or structure
    "wrong_output",     # right shape, values outside tolerance (or NaN/Inf)
    "wrong_on_variant", # correct on the task's shape, wrong or failing on a shape variant
    "cheat",            # passed numerically by a known cheat (see evaluator/cheats.py)
    "indistinguishable",# matched a reference whose outputs do not depend on its inputs: the task decides nothing
    "no_custom_kernel", # correct, but no custom kernel was defined and launched
    "correct_unstable", # correct custom kernel, timings too spread for a verdict (CPU under load)
    "correct_slower",   # correct custom kernel, slower than the reference beyond noise
    "correct_tie",      # correct custom kernel, indistinguishable from the reference
    "correct_faster",   # correct custom kernel, faster than the reference beyond noise
)

SUCCESS_CATEGORIES = frozenset({"correct_unstable", "correct_slower", "correct_tie", "correct_faster"})
# Numerically correct outputs (a success or plain PyTorch that matched).
NUMERICALLY_CORRECT = SUCCESS_CATEGORIES | {"no_custom_kernel"}
# Correct on the task's own shape (what a single-shape evaluation counts as
# correct): numerically correct, or wrong only on a shape variant.
CORRECT_ON_TASK_SHAPE = NUMERICALLY_CORRECT | {"wrong_on_variant"}
# The candidate never produced output because it could not be built or loaded.
BUILD_FAILURES = frozenset({"no_code", "syntax_error", "interface_error", "hallucinated_api", "compile_error"})

# Records that are not evaluations: a stopped turn or a failed model call.
NOT_EVALUATED = ("stopped", "generation_failed")


def precedence(category: str) -> int:
    return CATEGORIES.index(category)


def first_category(candidates: list[str]) -> str:
    """The highest-precedence category among several that apply."""
    return min(candidates, key=precedence)


def selection_key(result: Mapping[str, Any] | None) -> tuple:
    """Order of 'better' used to pick the best candidate of a turn and the best
    turn of a cell: (correct, custom kernel launched, compiled, speedup).
    A correct plain-PyTorch rewrite ranks below a correct custom kernel, and a
    cheat is never correct. Ties keep the earlier candidate (callers use a
    strict `>` when scanning in order), so a later broken turn can never displace
    an earlier working one."""
    if not result or result.get("category") not in CATEGORIES:
        return (False, False, False, float("-inf"))
    speedup = result.get("speedup")
    return (
        bool(result.get("correct")),
        bool(result.get("correct")) and bool(result.get("custom_kernel")),
        bool(result.get("compiled")),
        float(speedup) if speedup is not None else float("-inf"),
    )


def best_of(results: list[Mapping[str, Any] | None]) -> int | None:
    """Index of the best result by `selection_key`; the earliest wins ties."""
    best, best_key = None, None
    for i, result in enumerate(results):
        if result is None:
            continue
        key = selection_key(result)
        if best_key is None or key > best_key:
            best, best_key = i, key
    return best
