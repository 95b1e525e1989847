"""How a model calls a tool: the one definition of each tool's interface, its
native (OpenAI function-calling) schema, and the text protocol for backends
without native tool calls (the embedded base model, replay).

Text protocol (docs/react.md): a reply may open with reasoning in
<think>...</think> (recorded, never sent back, never taken as code), then

    Action: <tool name>
    <argument>: <value>          one line per argument
    ```python
    <a block: write_file's content; edit_file's old text, then a second block with the new text>
    ```

Only the first Action line counts. A ```python block in an evaluate or submit
reply is the `code` argument: it replaces model_new.py before the action runs
(so "Action: submit" with a block submits that code); a reply with only a code
block writes it to model_new.py; other actions ignore code blocks."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from kernelsweep.prompting.extract import PYTHON_TAGS, fenced_blocks

CANDIDATE_FILE = "model_new.py"

# name -> (description, {argument: description}, required arguments, flag that enables it)
TOOLS: dict[str, tuple[str, dict[str, str], tuple[str, ...], str | None]] = {
    "write_file": ("Create or overwrite a file in your workspace.",
                   {"path": "file name inside the workspace", "content": "the whole file"}, ("path", "content"), "editor"),
    "edit_file": ("Replace one exact, unique occurrence of `old` with `new` in a workspace file.",
                  {"path": "file name inside the workspace", "old": "text to replace (must occur once)",
                   "new": "replacement text"}, ("path", "old", "new"), "editor"),
    "view_file": ("Show a workspace file with line numbers (or list the workspace when path is '.').",
                  {"path": "file name inside the workspace"}, ("path",), "editor"),
    "run": ("Run a Python script of your workspace in a sandboxed worker on the study's device, with a time "
            "limit; returns its exit status and the end of its output.",
            {"path": "script inside the workspace"}, ("path",), "run"),
    "evaluate": ("Evaluate model_new.py with the real evaluator: verdict, error, max difference, speedup with "
                 "its 95% interval.", {"code": "optional: replaces model_new.py first"}, (), "evaluate"),
    "profile": ("Profile the reference or your model_new.py: self time per operator, FLOPs, bytes, roofline.",
                {"target": "reference or candidate"}, ("target",), "profiler"),
    "search_docs": ("Search the kernel-programming notes (CUDA, PTX, C++ extensions) for a query.",
                    {"query": "keywords"}, ("query",), "docs"),
    "submit": ("Submit model_new.py for scoring; you get its verdict. The cell's result is a submission.",
               {"code": "optional: replaces model_new.py first"}, (), None),
}
EDITING = ("write_file", "edit_file")
_ACTION = re.compile(r"^\s*\**\s*action\s*\**\s*:\s*\**\s*`?([A-Za-z_]+)`?", re.IGNORECASE | re.MULTILINE)
_ARG = re.compile(r"^\s*([A-Za-z_]+)\s*:\s*(.*?)\s*$")
_THINK = re.compile(r"<think>(.*?)(?:</think>|\Z)", re.DOTALL | re.IGNORECASE)


@dataclass
class ToolCall:
    name: str
    args: dict[str, Any]
    id: str

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "args": self.args}


@dataclass
class Parsed:
    reasoning: str | None
    content: str                      # the reply without its reasoning: what is sent back
    calls: list[ToolCall] = field(default_factory=list)
    error: str | None = None          # why no tool call could be read


def enabled_tools(flags: dict[str, Any]) -> list[str]:
    return [name for name, (_, _, _, flag) in TOOLS.items() if flag is None or flags.get(flag)]


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning, the rest): <think> blocks are recorded apart and dropped from the reply."""
    found = [m.strip() for m in _THINK.findall(text)]
    rest = _THINK.sub("", text).strip()
    return ("\n\n".join(f for f in found if f) or None), rest


def parse_text(text: str, step: int, allowed: list[str]) -> Parsed:
    """The tool call of a text-protocol reply."""
    reasoning, content = split_reasoning(text)
    call_id = f"s{step}"
    code_blocks = [body for lang, body in fenced_blocks(content) if lang in PYTHON_TAGS or not lang]
    match = _ACTION.search(content)
    if not match:
        if code_blocks:
            return Parsed(reasoning, content, [ToolCall("write_file", {"path": CANDIDATE_FILE,
                                                                        "content": code_blocks[-1]}, call_id)])
        return Parsed(reasoning, content, error="no 'Action: <tool>' line and no ```python block")
    name = match.group(1).lower()
    if name not in allowed:
        return Parsed(reasoning, content, error=f"unknown or disabled tool {name!r}; available: {', '.join(allowed)}")
    args: dict[str, Any] = {}
    after = content[match.end():]
    for line in after.split("\n")[1:]:
        if not line.strip() or line.lstrip().startswith("```"):
            break
        arg = _ARG.match(line)
        if not arg or arg.group(1).lower() not in TOOLS[name][1]:
            break
        args[arg.group(1).lower()] = arg.group(2)
    after_blocks = [body for _, body in fenced_blocks(after)]
    if name == "write_file" and after_blocks:
        args["content"] = after_blocks[0]
    elif name == "edit_file" and len(after_blocks) >= 2:
        args["old"], args["new"] = after_blocks[0], after_blocks[1]
    elif "code" in TOOLS[name][1] and code_blocks:  # evaluate / submit
        args["code"] = code_blocks[-1]
    missing = [a for a in TOOLS[name][2] if a not in args]
    if missing:
        return Parsed(reasoning, content, error=f"{name} needs {', '.join(missing)}")
    return Parsed(reasoning, content, [ToolCall(name, args, call_id)])


def parse_native(message: dict[str, Any], step: int, allowed: list[str]) -> Parsed:
    """The tool calls of a native (OpenAI) assistant message."""
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    think, content = split_reasoning(message.get("content") or "")
    reasoning = "\n\n".join(r for r in (reasoning, think) if r) or None
    calls, errors = [], []
    for i, raw in enumerate(message.get("tool_calls") or []):
        function = raw.get("function") or {}
        name = function.get("name") or ""
        call_id = raw.get("id") or f"s{step}-{i}"
        try:
            args = json.loads(function.get("arguments") or "{}")
            if not isinstance(args, dict):
                raise ValueError("arguments are not an object")
        except ValueError as e:
            errors.append(f"{name}: arguments are not JSON ({e})")
            args = {"_invalid": function.get("arguments")}
        if name not in allowed:
            errors.append(f"unknown or disabled tool {name!r}")
        calls.append(ToolCall(name, args, call_id))
    if not calls:
        return Parsed(reasoning, content, error="the reply called no tool")
    return Parsed(reasoning, content, calls, "; ".join(errors) or None)


def native_schemas(allowed: list[str]) -> list[dict[str, Any]]:
    out = []
    for name in allowed:
        description, args, required, _ = TOOLS[name]
        out.append({"type": "function", "function": {
            "name": name, "description": description,
            "parameters": {"type": "object", "properties": {a: {"type": "string", "description": d}
                                                            for a, d in args.items()},
                           "required": list(required)}}})
    return out


def text_manual(allowed: list[str]) -> str:
    """The tool list as the text protocol shows it to the model."""
    lines = []
    for name in allowed:
        description, args, required, _ = TOOLS[name]
        shown = ", ".join(a if a in required else f"{a}?" for a in args)
        lines.append(f"- {name}({shown}): {description}")
    return "\n".join(lines)
