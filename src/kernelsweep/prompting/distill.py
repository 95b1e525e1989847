"""Prompt feedback: one evaluation distilled into words a model can act on, for
the next turn's prompt (iterative refinement and the agentic feedback analyzer).
The study's report is kernelsweep.report."""

from __future__ import annotations

from typing import Any, Mapping

# What each category means, in words a model can act on.
CATEGORY_HINTS: dict[str, str] = {
    "no_code": "the response contained no Python code block",
    "syntax_error": "the Python module does not parse",
    "interface_error": "ModelNew is missing or its constructor / forward signature does not match Model",
    "hallucinated_api": "the code uses a header, module, function or attribute that does not exist",
    "compile_error": "the extension failed to compile",
    "timeout": "the evaluation did not finish in time (a hang or an extremely slow kernel)",
    "crash": "the process crashed (segmentation fault, illegal memory access or abort)",
    "out_of_memory": "the candidate ran out of memory",
    "runtime_error": "ModelNew raised an exception while being built or run",
    "shape_mismatch": "an output has the wrong shape, dtype or structure",
    "wrong_output": "the outputs differ from the reference beyond tolerance",
    "wrong_on_variant": ("correct on the task's input shape, but wrong or failing on other sizes of the same "
                         "task: do not hard-code sizes, handle any size (tails not a multiple of the block size)"),
    "cheat": "the candidate only passed by a forbidden shortcut (answers right only when judged, mutated inputs, patched timers)",
    "indistinguishable": ("the outputs match, but the reference's outputs do not depend on its inputs, so a match "
                          "says nothing: this task cannot tell a kernel from a constant"),
    "no_custom_kernel": "the outputs are correct but no custom kernel of yours ran during forward",
    "correct_slower": "correct, but slower than the reference",
    "correct_tie": "correct, and as fast as the reference within measurement noise",
    "correct_faster": "correct and faster than the reference",
}

MAX_ERROR_CHARS = 1200


def _fmt_ms(stats: Mapping[str, Any] | None) -> str | None:
    if not stats or stats.get("median") is None:
        return None
    return f"{stats['median']:.4g} ms"


def distill(result: Mapping[str, Any]) -> str:
    category = result.get("category", "unknown")
    lines = [f"- verdict: {category} ({CATEGORY_HINTS.get(category, 'not evaluated')})"]
    error = result.get("error") or {}
    if error.get("message"):
        message = str(error["message"]).strip()
        if len(message) > MAX_ERROR_CHARS:
            message = message[:MAX_ERROR_CHARS] + " …"
        lines.append(f"- error ({error.get('type', 'error')}):\n{message}")
    if result.get("max_abs_diff") is not None:
        lines.append(f"- largest absolute difference from the reference: {result['max_abs_diff']:.3g}")
    cand, ref = _fmt_ms(result.get("runtime_ms")), _fmt_ms(result.get("ref_runtime_ms"))
    if cand and ref:
        speed = result.get("speedup")
        lines.append(f"- time per call: yours {cand}, reference {ref}" + (f" (speedup {speed:.3g}x)" if speed else ""))
    return "\n".join(lines)
