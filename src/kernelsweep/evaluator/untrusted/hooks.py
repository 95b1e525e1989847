"""Interpreter hooks through which candidate code could run inside the
harness's own code after a timed call returns (the copy of its output, the
saving of checked outputs): profile, trace and monitoring callbacks.
Captured at import, before any candidate code; checked by the candidate's
worker where the harness's code runs after the candidate's."""

from __future__ import annotations

import sys

_getprofile, _gettrace = sys.getprofile, sys.gettrace
_get_tool = getattr(getattr(sys, "monitoring", None), "get_tool", None)
_TOOL_IDS = range(6)


def installed() -> list[str]:
    """The hooks set in this thread (none while the harness's own code runs)."""
    found = []
    if _getprofile() is not None:
        found.append("sys.setprofile")
    if _gettrace() is not None:
        found.append("sys.settrace")
    if _get_tool is not None:
        found += [f"sys.monitoring tool {i}" for i in _TOOL_IDS if _get_tool(i) is not None]
    return found
