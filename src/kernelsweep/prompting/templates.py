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


def example_candidate(device: str) -> str:
    """The minimal correct load_inline module shown to the model for this device."""
    return template_text(f"example_{device}.py").strip()
