"""Code extraction: the one place that turns a model's raw text into a candidate.

`extract_code(text)` finds the Python module a response proposes. Rules, in order:

1. A reasoning trace (`<think>…</think>`, or a bare `</think>` when the chat
   template opened it) is dropped when it is closed: drafts inside it are not
   the answer.
2. Fenced blocks (``` or ~~~, any info string, indented or not) are collected;
   a fence left open (a response cut at max_tokens) runs to the end of the text.
3. Among the blocks, the one that defines `class ModelNew` wins (the last such
   block that parses, else the last such block: models restate a corrected
   version after a first attempt). Otherwise the longest Python-tagged block,
   else the longest untagged block, else the longest block of any language (a
   C++-only answer is code, so the evaluator reports it as a syntax error rather
   than as "no code").
4. Without fences, a response that is bare Python (possibly after a line of
   prose) is taken as is.
5. Prose only gives `code=None`: the candidate is a `no_code` candidate.

`fenced_blocks(text)` is the same fence scanner for the react agent's text
protocol (kernelsweep.agent.protocol), which reads a tool's arguments from blocks.
"""

from __future__ import annotations

import ast
import re
from dataclasses import asdict, dataclass

METHODS = ("fenced_python", "fenced_any", "unterminated_fence", "raw_python", "none")

PYTHON_TAGS = frozenset({"python", "py", "python3", "py3", "pytorch"})

# An opening fence: up to any indentation, 3+ backticks or tildes, an optional
# info string. Backtick info strings may not contain backticks (CommonMark).
_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\n]*?)[ \t]*$")
_DEFINES_MODELNEW = re.compile(r"^[ \t]*class[ \t]+ModelNew\b", re.M)
_THINK = re.compile(r"<think>.*?</think>", re.S)
# Lines that start Python code when a response has no fences.
_CODE_START = re.compile(r"^(import [\w.]+|from [\w.]+ import |class \w+|def \w+|@\w+|#!|[\w.]+ *= *\S)")


@dataclass(frozen=True)
class Extraction:
    code: str | None      # the candidate source (ends with one newline), or None: no code
    method: str           # one of METHODS
    blocks: int           # fenced blocks found (closed or not)
    chosen: int | None    # index of the chosen block among them, None when not fenced

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class _Block:
    lang: str       # lower-cased first word of the info string ("" when untagged)
    body: str
    closed: bool
    start: int      # line index of the opening fence
    stop: int       # line index of the closing fence (len(lines) when left open)


def _scan_blocks(lines: list[str]) -> list[_Block]:
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence = m.group("fence")
        lang = (m.group("info").split() or [""])[0].lower().lstrip("{.").rstrip("}")
        body: list[str] = []
        j = i + 1
        closed = False
        while j < len(lines):
            close = _FENCE.match(lines[j])
            # A closing fence: same character, at least as long, no info string.
            if close and close.group("fence")[0] == fence[0] and len(close.group("fence")) >= len(fence) \
                    and not close.group("info"):
                closed = True
                break
            body.append(lines[j])
            j += 1
        blocks.append(_Block(lang, "\n".join(body), closed, i, j))
        i = j + 1
    return blocks


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every closed fenced block, in order. The body is exactly
    the lines between the fences, each ending with a newline (a file's content, an
    edit's old or new text), not tidied as a candidate is."""
    lines = text.replace("\r\n", "\n").split("\n")
    return [(b.lang, "".join(line + "\n" for line in lines[b.start + 1:b.stop]))
            for b in _scan_blocks(lines) if b.closed]


def _dedent(code: str) -> str:
    """Remove the indentation all non-blank lines share (a block inside a list
    item) and nothing else: unlike textwrap.dedent, whitespace inside string
    literals is left exactly as written."""
    lines = code.split("\n")
    indents = [line[: len(line) - len(line.lstrip(" \t"))] for line in lines if line.strip()]
    prefix = indents[0] if indents else ""
    for indent in indents[1:]:
        while not indent.startswith(prefix):
            prefix = prefix[:-1]
    if not prefix:
        return code
    return "\n".join(line[len(prefix):] if line.startswith(prefix) else line.lstrip(" \t") for line in lines)


def _tidy(code: str) -> str | None:
    """The block as a file: common indentation and surrounding blank lines
    removed, one final newline."""
    code = _dedent(code)
    lines = code.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines).rstrip() + "\n" if lines else None


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: null bytes
        return False
    return True


def _has_code_statements(code: str) -> bool:
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    return any(isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign))
               for node in tree.body)


def _choose(blocks: list[_Block]) -> int | None:
    candidates = [i for i, b in enumerate(blocks) if b.body.strip()]
    if not candidates:
        return None
    defining = [i for i in candidates if _DEFINES_MODELNEW.search(blocks[i].body)]
    if defining:
        parsing = [i for i in defining if _parses(_dedent(blocks[i].body))]
        return (parsing or defining)[-1]
    for group in (
        [i for i in candidates if blocks[i].lang in PYTHON_TAGS],
        [i for i in candidates if not blocks[i].lang],
        candidates,
    ):
        if group:
            # max() keeps the first of equally long blocks.
            return max(group, key=lambda i: len(blocks[i].body.strip()))
    return None


def _raw_python(text: str) -> str | None:
    """The Python in a response without fences: from the first line that looks
    like code to the longest prefix that parses (trailing prose dropped)."""
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _CODE_START.match(line)), None)
    if start is None:
        return None
    region = lines[start:]
    whole = "\n".join(region)
    parsed = next((candidate for end in range(len(region), 0, -1)
                   if _has_code_statements(candidate := "\n".join(region[:end]))), None)
    if _DEFINES_MODELNEW.search(whole) and not (parsed and _DEFINES_MODELNEW.search(parsed)):
        return whole  # broken Python is still code when it plainly attempts the module
    return parsed


def extract_code(text: str | None) -> Extraction:
    """The candidate module proposed by a model response (see the module docstring)."""
    if not text or not text.strip():
        return Extraction(None, "none", 0, None)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _THINK.sub("", text)
    if "</think>" in text and "<think>" not in text:
        # The template opened the trace in the prompt: the answer follows its end.
        text = text.rsplit("</think>", 1)[1]
    lines = text.split("\n")
    blocks = _scan_blocks(lines)

    chosen = _choose(blocks)
    if chosen is not None and not _DEFINES_MODELNEW.search(blocks[chosen].body):
        # A module written bare, followed by a lone fence (e.g. a prompt that
        # opened the fence itself): the text before the first fence is the code.
        raw = _raw_python("\n".join(lines[: blocks[0].start]))
        if raw is not None and _DEFINES_MODELNEW.search(raw) and _parses(raw):
            return Extraction(_tidy(raw), "raw_python", len(blocks), None)
    if chosen is not None:
        block = blocks[chosen]
        if not block.closed:
            method = "unterminated_fence"
        elif block.lang in PYTHON_TAGS:
            method = "fenced_python"
        else:
            method = "fenced_any"
        return Extraction(_tidy(block.body), method, len(blocks), chosen)

    raw = _raw_python(text)
    if raw is not None and (code := _tidy(raw)) is not None:
        return Extraction(code, "raw_python", len(blocks), None)
    return Extraction(None, "none", len(blocks), None)
