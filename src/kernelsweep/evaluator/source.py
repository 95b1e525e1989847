"""What can be known about a candidate without running it: is there code, does
it parse, does it name ModelNew, and which kernels does it define (static
kernel evidence). Runs in the parent; imports nothing heavy."""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from typing import Any

_GLOBAL_KERNEL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(?:static\s+)?void\s+"
    r"(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)\s*\(")
_PYBIND_DEF = re.compile(r"\bm\.def\(\s*\"(\w+)\"")
_TORCH_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,")
_CPP_FUNCTION = re.compile(
    r"^[ \t]*(?:template\s*<[^>]*>\s*)?(?:static\s+|inline\s+)*"
    r"(?:[\w:]+(?:\s*<[^;{}()]*>)?[\s*&]+)+(\w+)\s*\([^;{}]*\)\s*(?:const\s*)?\{", re.M)
_CPP_KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "catch", "defined"}
_EXTENSION_FUNCTIONS = {"load_inline", "load"}


@dataclass
class SourceInfo:
    text: str
    sha256: str
    no_code: bool = False
    syntax_error: dict[str, Any] | None = None
    names_model_new: bool = False
    defined_names: frozenset[str] = frozenset()
    evidence: dict[str, Any] = field(default_factory=dict)


def _strings(tree: ast.AST) -> list[str]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append(node.value)
    return out


def _call_name(func: ast.AST) -> str:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _is_triton_decorator(node: ast.AST) -> bool:
    target = node.func if isinstance(node, ast.Call) else node
    text = ast.unparse(target)
    return text in ("triton.jit", "jit", "triton.autotune", "autotune", "triton.heuristics", "heuristics") \
        or text.endswith((".triton.jit",))


def _is_numba_cuda_decorator(node: ast.AST) -> bool:
    """`@cuda.jit` / `@numba.cuda.jit` (with or without arguments): a Numba CUDA
    kernel, unless `device=True` makes it a device function (never launched)."""
    target = node.func if isinstance(node, ast.Call) else node
    device = isinstance(node, ast.Call) and any(
        k.arg == "device" and isinstance(k.value, ast.Constant) and k.value.value is True for k in node.keywords)
    return ast.unparse(target) in ("cuda.jit", "numba.cuda.jit") and not device


def _only_docstring_or_pass(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        return False
    return True


def analyze(text: str) -> SourceInfo:
    info = SourceInfo(text=text, sha256=hashlib.sha256(text.encode("utf-8")).hexdigest())
    if not text.strip():
        info.no_code = True
        return info
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:  # ValueError: null bytes
        info.syntax_error = {
            "type": type(exc).__name__,
            "message": getattr(exc, "msg", None) or str(exc),
            "line": getattr(exc, "lineno", None),
            "offset": getattr(exc, "offset", None),
        }
        return info
    if _only_docstring_or_pass(tree.body):
        info.no_code = True
        return info

    defined: set[str] = set()
    triton_kernels: list[str] = []
    numba_kernels: list[str] = []
    extension_calls: list[dict[str, Any]] = []
    bound_functions: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
            if not isinstance(node, ast.ClassDef) and any(_is_triton_decorator(d) for d in node.decorator_list):
                triton_kernels.append(node.name)
            if not isinstance(node, ast.ClassDef) and any(_is_numba_cuda_decorator(d) for d in node.decorator_list):
                numba_kernels.append(node.name)
        elif isinstance(node, ast.Name) and node.id == "ModelNew":
            info.names_model_new = True
        elif isinstance(node, ast.Call) and _call_name(node.func) in _EXTENSION_FUNCTIONS:
            keywords = {k.arg for k in node.keywords if k.arg}
            call = {"function": _call_name(node.func), "keywords": sorted(keywords),
                    "line": node.lineno}
            if call["function"] == "load" and "sources" not in keywords and len(node.args) < 2:
                continue  # some other `load` (torch.load, json.load, ...)
            extension_calls.append(call)
            for k in node.keywords:
                if k.arg == "functions" and isinstance(k.value, (ast.List, ast.Tuple, ast.Set)):
                    bound_functions.update(e.value for e in k.value.elts
                                           if isinstance(e, ast.Constant) and isinstance(e.value, str))
    if "ModelNew" in defined:
        info.names_model_new = True

    strings = _strings(tree)
    cuda_kernels = sorted({m for s in strings for m in _GLOBAL_KERNEL.findall(s)})
    for s in strings:
        bound_functions.update(_PYBIND_DEF.findall(s))
    namespaces = sorted({m for s in strings for m in _TORCH_LIBRARY.findall(s)})
    cpp_functions = sorted({m for s in strings if "(" in s and "{" in s
                            for m in _CPP_FUNCTION.findall(s) if m not in _CPP_KEYWORDS})
    info.defined_names = frozenset(defined)
    info.evidence = {
        "extension_calls": extension_calls,
        "cuda_kernels": cuda_kernels,
        "triton_kernels": sorted(set(triton_kernels)),
        "numba_kernels": sorted(set(numba_kernels)),
        "cpp_functions": cpp_functions,
        "bound_functions": sorted(bound_functions),
        "op_namespaces": namespaces,
    }
    return info


def defines_kernel(evidence: dict[str, Any], device: str) -> bool:
    """Static half of custom_kernel: the source defines a kernel for the target."""
    if not evidence:
        return False
    if device == "cuda":
        return bool(evidence.get("cuda_kernels") or evidence.get("triton_kernels") or evidence.get("numba_kernels"))
    return bool(evidence.get("extension_calls")) and bool(
        evidence.get("cpp_functions") or evidence.get("bound_functions"))


def profiled(evidence: dict[str, Any], device: str) -> bool:
    """Whether the candidate's forward runs once under the torch profiler
    (untrusted/kernels.py): on a GPU, for every candidate that defines a kernel
    (its kernels' share of the device time, their launches)."""
    return device == "cuda" and defines_kernel(evidence, device)


def kernel_names(evidence: dict[str, Any], device: str) -> list[str]:
    """Names a launched kernel (cuda) or an extension call (cpu) should match."""
    if device == "cuda":
        return sorted(set(evidence.get("cuda_kernels", [])) | set(evidence.get("triton_kernels", []))
                      | set(evidence.get("numba_kernels", [])))
    return sorted(set(evidence.get("bound_functions", [])) | set(evidence.get("cpp_functions", [])))


def analyze_bytes(text: str | None, data: bytes) -> SourceInfo:
    """analyze() for a file's contents; undecodable bytes are a syntax error
    (the one reading of them, for the compile step and the evaluation alike)."""
    if text is None:
        return SourceInfo(text="", sha256=hashlib.sha256(data).hexdigest(),
                          syntax_error={"type": "UnicodeDecodeError", "message": "the candidate is not UTF-8 text"})
    return analyze(text)


def static_verdict(info: SourceInfo) -> tuple[str, dict[str, Any]] | None:
    """(category, error) when the source alone decides, else None."""
    if info.no_code:
        return "no_code", {"type": "NoCode", "message": "the candidate contains no code", "log": None}
    if info.syntax_error:
        e = info.syntax_error
        where = f"line {e['line']}: " if e.get("line") else ""
        return "syntax_error", {"type": e["type"], "message": f"{where}{e['message']}", "log": None}
    if not info.names_model_new:
        return "interface_error", {"type": "InterfaceError", "message": "the candidate never defines ModelNew",
                                   "log": None}
    return None
