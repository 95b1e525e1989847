"""Compiler and linker diagnostics, parsed from a failed build's output.

Only the diagnostics themselves are read, in the forms the toolchain emits:
gcc/clang `file:line:col: error: message`, nvcc's front end
`file(line): error: message`, and the linker's `undefined reference to` /
`cannot find -l`. A diagnostic names a missing API (hallucinated_api) when its
message says that a header, namespace member, identifier, type or library does
not exist; any other error makes the build a compile_error."""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import asdict, dataclass

_GCC = re.compile(r"^(?P<file>[^\s:][^:\n]*):(?P<line>\d+):(?:(?P<col>\d+):)?\s*"
                  r"(?P<severity>fatal error|error):\s*(?P<message>.+)$", re.M)
_NVCC = re.compile(r"^(?P<file>[^\s(][^(\n]*)\((?P<line>\d+)\):\s*"
                   r"(?P<severity>catastrophic error|error):\s*(?P<message>.+)$", re.M)
_LINKER = re.compile(r"^[^\n]*?:\s*(?P<message>(?:undefined reference to|cannot find -l)[^\n]+)$", re.M)

# Messages (gcc, clang, nvcc, ld) saying that a named thing does not exist.
_MISSING = [re.compile(p) for p in (
    r"^(?P<symbol>\S+): No such file or directory$",                  # gcc: #include of a missing header
    r"^'(?P<symbol>[^']+)' file not found$",                          # clang
    r'^cannot open source file "(?P<symbol>[^"]+)"',                  # nvcc
    r"^'(?P<symbol>[^']+)' was not declared in this scope",           # gcc
    r"^'(?P<symbol>[^']+)' has not been declared",
    r"^'(?P<symbol>[^']+)' is not a member of '(?P<owner>[^']+)'",
    r"^'(?P<owner>[^']+)' has no member named '(?P<symbol>[^']+)'",
    r"^'(?P<symbol>[^']+)' does not name a type",
    r"^'(?P<symbol>[^']+)' in namespace '(?P<owner>[^']+)' does not name a (?:template )?type",
    r"^'(?P<symbol>[^']+)' is not a namespace-name",
    r"^there are no arguments to '(?P<symbol>[^']+)' that depend on a template parameter",
    r"^use of undeclared identifier '(?P<symbol>[^']+)'",             # clang
    r"^no member named '(?P<symbol>[^']+)' in (?:namespace )?'(?P<owner>[^']+)'",
    r"^unknown type name '(?P<symbol>[^']+)'",
    r'^identifier "(?P<symbol>[^"]+)" is undefined',                  # nvcc
    r'^namespace "(?P<owner>[^"]+)" has no member (?:class |function )?"(?P<symbol>[^"]+)"',
    r'^class "(?P<owner>[^"]+)" has no member (?:class |function )?"(?P<symbol>[^"]+)"',
    r'^name followed by "::" must be a class or namespace name',
    r"^undefined reference to [`'](?P<symbol>[^'`]+)'",               # ld
    r"^cannot find -l(?P<symbol>\S+)",
)]


@dataclass
class Diagnostic:
    file: str | None
    line: int | None
    severity: str
    message: str
    missing: str | None = None  # the symbol/header the message says does not exist

    def to_dict(self) -> dict:
        return asdict(self)


def _missing(message: str) -> str | None:
    for pattern in _MISSING:
        m = pattern.match(message)
        if m:
            symbol = m.groupdict().get("symbol") or message
            if message.startswith("undefined reference") and not is_library_symbol(symbol):
                return None  # the candidate's own function, declared but never defined
            return symbol
    return None


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def parse(output: str) -> list[Diagnostic]:
    """Every error diagnostic in a build log, in order of appearance. gcc
    quotes with typographic quotes under a UTF-8 locale; they are folded to
    ASCII first."""
    output = output.translate(_QUOTES)
    found: list[tuple[int, Diagnostic]] = []
    for regex in (_GCC, _NVCC):
        for m in regex.finditer(output):
            msg = m.group("message").strip()
            found.append((m.start(), Diagnostic(m.group("file"), int(m.group("line")), m.group("severity"),
                                                msg, _missing(msg))))
    for m in _LINKER.finditer(output):
        msg = m.group("message").strip()
        found.append((m.start(), Diagnostic(None, None, "error", msg, _missing(msg))))
    found.sort(key=lambda x: x[0])
    return [d for _, d in found]


def first_line(text: str) -> str:
    """The first line with text in it (stripped)."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), str(text).strip())


def headline(output: str) -> tuple[str, Diagnostic | None, list[Diagnostic]]:
    """Why a build failed, in one line: the first missing header or symbol,
    else the first error, else the first line after ninja's FAILED; with the
    diagnostic chosen and all of them."""
    diags = parse(output)
    missing = [d for d in diags if d.missing]
    chosen = missing[0] if missing else (diags[0] if diags else None)
    if chosen is None:
        return first_line(output.split("FAILED:")[-1]) or "build failed", None, diags
    where = f"{chosen.file.rsplit('/', 1)[-1]}:{chosen.line}: " if chosen.file else ""  # the build folder is noise
    return f"{where}{chosen.message}", chosen, diags


# Namespaces of libraries a candidate links against; a missing symbol there is a
# hallucinated API, a missing symbol of the candidate's own is a compile error.
LIBRARY_NAMESPACES = ("at::", "c10::", "torch::", "caffe2::", "cub::", "thrust::", "cutlass::", "cute::",
                      "cublas", "cudnn", "cufft", "curand", "cusparse", "pybind11::")


def demangle(symbol: str) -> str:
    tool = shutil.which("c++filt")
    if not tool or not symbol.startswith("_Z"):
        return symbol
    try:
        out = subprocess.run([tool, symbol], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or symbol
    except (OSError, subprocess.SubprocessError):
        return symbol


def undefined_symbol(message: str) -> str | None:
    """The symbol of a dlopen 'undefined symbol: X' error, demangled."""
    m = re.search(r"undefined symbol: (\S+)", message)
    return demangle(m.group(1)) if m else None


def is_library_symbol(symbol: str) -> bool:
    return symbol.lstrip(":").startswith(LIBRARY_NAMESPACES)
