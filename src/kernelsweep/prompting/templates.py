"""Prompt templates: files under kernelsweep/prompting/prompts, filled with string.Template
($name placeholders) so braces in C++ and Python code need no escaping."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from string import Template


@lru_cache(maxsize=None)
def template_text(name: str) -> str:
    return resources.files(__package__).joinpath("prompts", name).read_text(encoding="utf-8")


def render(name: str, **values: str) -> str:
    """Fill a template; a missing value is a programming error, so fail loudly."""
    return Template(template_text(name)).substitute(**values).strip()


def device_note(device: str, precision: str) -> str:
    """Where the module runs and, below fp32, the dtype its kernels get and must return
    (an fp32 prompt says nothing about precision, as before precision was an axis)."""
    note = render(f"device_{device}.md")
    if precision == "fp32":
        return note
    from kernelsweep.evaluator.settings import TOLERANCES
    from kernelsweep.runtime.taskcode import DTYPE_NAMES

    atol, rtol = TOLERANCES[precision]
    tolerance = f"{atol:g}" if atol == rtol else f"{atol:g} / {rtol:g}"
    return note + "\n\n" + render("precision.md", precision=precision, dtype=DTYPE_NAMES[precision],
                                    tolerance=tolerance)


def example_candidate(device: str) -> str:
    """The minimal correct load_inline module shown to the model for this device."""
    return template_text(f"example_{device}.py").strip()
