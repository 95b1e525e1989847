"""Shape variants of a task: its module-level size constants, rescaled.

KernelBench task files define their sizes as module-level integer constants
(`batch_size = 16`, `dim = 16384`, `N = 2048 * 2`) that `get_inputs()` and
`get_init_inputs()` read. A variant executes the task module with some of
those constants replaced (the assignment itself is rewritten, so constants
derived from them follow), in every worker alike: the reference's and the
candidate's inputs, and ModelNew's init inputs, all come from the variant.

Which constants are sizes: integer constants (literals, or arithmetic on
literals) of at least MIN_SIZE, whose name is not one of the hyperparameters
that are no sizes (kernel_size, stride, padding, dilation, groups, heads,
pooling, layers, ...). Small integers are left alone: they are axes, kernel
sizes or counts more often than dimensions.

The variant rule (RULES, in order; `evaluation.shape_variants` takes the first n):
every size constant c becomes the odd number nearest above round(c * factor)
(at least 3, never c itself), so a variant is never a multiple of a block
size (32, 128, 256), and both a smaller and a larger shape are checked.

Standard library only: the parent (no torch) and the workers share it."""

from __future__ import annotations

import ast
import math
import re
from typing import Any

MIN_SIZE = 8
# Names that are hyperparameters, not sizes (matched anywhere in the lowercased name).
NOT_SIZES = re.compile(r"kernel|stride|pad|dilation|group|head|pool|scale|factor|axis|layer|stage|cluster|"
                       r"patch|block|d_state|seed|iter|step|eps|top_?k|bins?$")
# (name, factor): the rule of each variant, in the order they are used.
RULES: tuple[tuple[str, float], ...] = (("smaller_odd", 0.5), ("larger_odd", 1.25), ("quarter_odd", 0.25))
MAX_VARIANTS = len(RULES)
_OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
        ast.FloorDiv: lambda a, b: a // b, ast.Pow: lambda a, b: a ** b, ast.LShift: lambda a, b: a << b}


def _int_value(node: ast.AST) -> int | None:
    """The value of an integer literal or of arithmetic on integer literals; None otherwise."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = _int_value(node.left), _int_value(node.right)
        if a is None or b is None or (isinstance(node.op, ast.Pow) and not 0 <= b <= 64) \
                or (isinstance(node.op, ast.LShift) and not 0 <= b <= 64) \
                or (isinstance(node.op, ast.FloorDiv) and b == 0):
            return None
        return _OPS[type(node.op)](a, b)
    return None


def _assignments(tree: ast.Module) -> list[tuple[ast.expr, str, int]]:
    """(value node, name, value) of every module-level integer constant:
    `n = 4096`, `n = 2048 * 2`, `h = w = 128`, `d, h, w = 16, 32, 32`."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            if isinstance(target, ast.Name):
                pairs = [(target, node.value)]
            elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple) \
                    and len(target.elts) == len(node.value.elts):
                pairs = list(zip(target.elts, node.value.elts))
            else:
                continue
            for name, expr in pairs:
                value = _int_value(expr) if isinstance(name, ast.Name) else None
                if value is not None:
                    found.append((expr, name.id, value))
    return found


def is_size(name: str, value: int) -> bool:
    return value >= MIN_SIZE and not NOT_SIZES.search(name.lower())


def size_constants(source: str) -> dict[str, int]:
    """The module-level size constants of a task's source, by name (the last assignment wins)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return {}
    return {name: value for _, name, value in _assignments(tree) if is_size(name, value)}


def rescale(value: int, factor: float) -> int:
    """The odd number at or above round(value * factor), at least 3, never `value` itself."""
    new = max(3, int(math.floor(value * factor + 0.5)))
    if new % 2 == 0:
        new += 1
    if new == value:
        new += 2
    return new


def variants(source: str, count: int) -> list[dict[str, Any]]:
    """The first `count` variants of a task: [{name, rule, factor, constants}]; none
    when the task has no size constants."""
    sizes = size_constants(source)
    if not sizes or count <= 0:
        return []
    return [{"name": name, "factor": factor, "constants": {k: rescale(v, factor) for k, v in sizes.items()}}
            for name, factor in RULES[:count]]


def shared_overrides(source: str, task: dict[str, int], overrides: dict[str, int]) -> dict[str, int]:
    """The overrides of a variant that apply to another module's SOURCE (a
    candidate's): those of the constants it assigns the task's own value too
    (a line as the reference's, `batch_size = 16`), so a module that reads the
    task's sizes from such a line sees the variant's, as the reference does. A
    name it gives another value (a tile size that happens to share the name)
    is its own and left alone."""
    try:
        mine = {name: value for _, name, value in _assignments(ast.parse(source))}
    except SyntaxError:
        return {}
    return {k: v for k, v in overrides.items() if k in mine and mine[k] == task.get(k)}


def batch_only(constants: dict[str, int]) -> dict[str, int]:
    """The batch-like constants of a variant (a narrower variant, for a
    reference that cannot run all its sizes rescaled)."""
    return {k: v for k, v in constants.items() if "batch" in k.lower()}


def substitute(source: str, overrides: dict[str, int]) -> str:
    """The task's source with the values of the overridden constants replaced
    (every module-level assignment of that name), as text: the rest of the
    file, its comments and line numbers, stay as they are."""
    tree = ast.parse(source)
    lines = source.splitlines(keepends=True)
    edits, seen = {}, set()
    for v, name, _ in _assignments(tree):
        if name in overrides:
            if v.lineno != v.end_lineno:
                raise ValueError(f"the value of {name} spans several lines")
            # `h = w = 128`: one value for both names (equal sizes get equal new values)
            edits.setdefault((v.lineno - 1, v.col_offset, v.end_col_offset), str(int(overrides[name])))
            seen.add(name)
    missing = set(overrides) - seen
    if missing:
        raise ValueError(f"the task assigns no integer constant {', '.join(sorted(missing))}")
    for (row, start, end), text in sorted(edits.items(), reverse=True):
        # ast offsets count UTF-8 bytes
        line = lines[row].encode("utf-8")
        lines[row] = (line[:start] + text.encode() + line[end:]).decode("utf-8")
    return "".join(lines)


def scaled(source: str, scale: float, *, batch_only: bool = False) -> tuple[str, dict[str, list[int]]]:
    """The task's source with every size constant (or only the batch-like
    ones) multiplied by `scale` (rounded, at least 1): `tasks.scale`, so a
    study fits a smaller device. Returns the source and {name: [original,
    scaled]} of what changed."""
    sizes = size_constants(source)
    if batch_only:
        sizes = {k: v for k, v in sizes.items() if "batch" in k.lower()}
    new = {k: max(1, int(math.floor(v * scale + 0.5))) for k, v in sizes.items()}
    changed = {k: [sizes[k], n] for k, n in new.items() if n != sizes[k]}
    if not changed:
        return source, {}
    return substitute(source, {k: n for k, (_, n) in changed.items()}), changed
