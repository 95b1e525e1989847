"""Intercept a candidate's extension builds (worker side).

torch.utils.cpp_extension.load_inline / load are replaced, before the
candidate is imported, by wrappers that
- give every build its own directory under the build cache, keyed by a hash of
  everything that determines the binary (sources, flags, torch, Python and,
  for CUDA, the target architectures). The compile step and the evaluation
  compute the same key, so the evaluation finds the compile step's build, and
  two candidates that happen to pick the same extension name never share or
  overwrite a build;
- report each build's start and end to the parent, which bounds build time
  with its own limit;
- remember failed builds (by exception identity) so the failure is classified
  from the compiler's diagnostics even when a candidate wraps the exception;
- remember the extension modules and hand each back through the perturber
  (perturb.py), so calls into them are counted and the harness can see
  whether the output depends on them.

The build root given to a worker is the candidate's own build directory
(keyed by the candidate's hash): one candidate's builds, or its recorded
failures, can never be found by another candidate.""" 

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import torch.utils.cpp_extension as cpp_extension

from kernelsweep.evaluator import diagnostics, settings

KEY_VERSION = "1"
_CUDA_SUFFIXES = (".cu", ".cuh")
# Arguments that do not change the binary.
_IGNORED = {"build_directory", "verbose", "keep_intermediates"}
# `load` from files: the sources, and the files beside them a source may include, are
# copied once into the build's own (content-keyed) folder and built from there. Built
# from where the candidate wrote them, a new temporary path on every run, torch's ninja
# build saw new commands and compiled again (16 s for a one-function C++ file on two
# cores), the compile step's build found but not used.
_STAGED_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu", ".h", ".hh", ".hpp", ".hxx", ".cuh", ".inl", ".inc"}
STAGED_FILES_MAX = 64
SEEN_FILES_MAX = 512


def _digests(named: list[tuple[str, Path]]) -> list[str]:
    digests = []
    for name, p in named:
        with open(p, "rb") as f:
            digests.append(f"{name}:{hashlib.sha256(f.read()).hexdigest()}")
    return digests


def _source_paths(sources: Any) -> list[Path]:
    return [Path(sources)] if isinstance(sources, (str, os.PathLike)) else [Path(s) for s in sources or []]


def staged_files(sources: Any) -> dict[str, Path] | None:
    """What a `load` build is staged from, by the name it gets there: its
    sources, and the C, C++ and CUDA files in and below each source's folder
    (what a source could include by a relative path), named relative to that
    folder; None where they cannot be staged so (two files for one name, a
    folder crowded beyond STAGED_FILES_MAX or SEEN_FILES_MAX files: /tmp itself)."""
    files: dict[str, Path] = {}

    def add(name: str, path: Path) -> bool:
        held = files.setdefault(name, path)
        return held == path or held.resolve() == path.resolve()

    for source in _source_paths(sources):
        if not add(source.name, source):
            return None
        seen = 0
        for folder, subfolders, names in os.walk(source.parent):
            subfolders.sort()
            seen += len(names) + len(subfolders)
            if seen > SEEN_FILES_MAX:
                return None
            for name in sorted(names):
                path = Path(folder, name)
                if path.suffix in _STAGED_SUFFIXES and not path.is_symlink() and path.is_file():
                    if not add(str(path.relative_to(source.parent)), path) or len(files) > STAGED_FILES_MAX:
                        return None
    return files if _includes_found(files) else None


_QUOTED_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*"([^"\n]+)"', re.M)


def _includes_found(files: dict[str, Path]) -> bool:
    """Whether every `#include "..."` that the compiler would find beside the
    including file (where the candidate wrote it) is staged under the name it
    would be found at there: else (`../common.cuh`, a symlinked or `.tpp`
    header) the build is left where the candidate wrote it. An include found
    only on the include paths is found there either way."""
    staged = {name: path.resolve() for name, path in files.items()}
    for name, path in files.items():
        for include in _QUOTED_INCLUDE.findall(path.read_bytes()):
            target = path.parent / os.fsdecode(include)
            if not target.exists():
                continue
            where = os.path.normpath(os.path.join(os.path.dirname(name), os.fsdecode(include)))
            if staged.get(where) != target.resolve():
                return False
    return True


def extension_key(function: str, arguments: dict[str, Any], cuda_arch: str | None,
                  staged: dict[str, Path] | None = None) -> str:
    """STAGED: the files a `load` build is staged from (staged_files), by the
    names they get there; None where it is built from the sources in place."""
    args = {k: v for k, v in arguments.items() if k not in _IGNORED}
    uses_cuda = bool(args.get("with_cuda"))
    if function == "load":
        sources = _source_paths(args.pop("sources", []))
        args["source_digests"] = _digests(list(staged.items()) if staged is not None else [(p.name, p) for p in sources])
        args["staged"] = staged is not None
        uses_cuda = uses_cuda or any(p.suffix in _CUDA_SUFFIXES for p in sources)
    else:
        uses_cuda = uses_cuda or bool(args.get("cuda_sources"))
    payload = {
        "v": KEY_VERSION, "function": function, "args": args, "torch": torch.__version__,
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "cuda_arch": cuda_arch if uses_cuda else None,
    }
    text = json.dumps(payload, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def failure_kind(exc: BaseException) -> str:
    """What part of a build failed, from the exception's structure."""
    cause = exc.__cause__ or exc.__context__
    if isinstance(cause, subprocess.CalledProcessError):
        return "compile"  # ninja (the compiler or the linker) exited non-zero
    if isinstance(exc, ImportError):
        return "load"  # the library was built but dlopen refused it (undefined symbol, ...)
    if isinstance(exc, (OSError, RuntimeError)) and _is_toolchain_problem(exc):
        return "toolchain"
    return "call"  # the call itself was wrong (bad argument types, ...)


def _is_toolchain_problem(exc: BaseException) -> bool:
    text = str(exc)
    return text.startswith("Ninja is required") or "CUDA_HOME environment variable is not set" in text


_FAILURE_FILE = "kernelsweep-build-failure.json"


def _remember_failure(directory: Path, output: str) -> None:
    """Keep a failed build's output when the compiler itself reported errors
    (deterministic for this key); a build that failed for another reason (a
    killed compiler, a full disk) is retried next time."""
    from kernelsweep.evaluator import diagnostics

    if not diagnostics.parse(output):
        return
    tmp = directory / (_FAILURE_FILE + ".tmp")
    tmp.write_text(json.dumps({"output": output}))
    os.replace(tmp, directory / _FAILURE_FILE)


def _why_it_failed(output: str) -> dict[str, str]:
    """A failed build's one line (diagnostics.headline), parsed once when it fails;
    nothing where the failure said nothing."""
    return {"error": diagnostics.headline(output)[0][:settings.BUILD_ERROR_CHARS]} if output else {}


def _known_failure(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / _FAILURE_FILE).read_text())
    except (OSError, ValueError):
        return None


def _stage(directory: Path, files: dict[str, Path], sources: Any) -> list[str]:
    """The sources' paths in the build's `src` folder, filled once with FILES
    (the key covers their contents, so a folder already there holds the same;
    left as it is, its files keep the times ninja compared): the same paths and
    commands on every run, and a build already made is used."""
    staged = directory / "src"
    if not staged.is_dir():
        fresh = Path(tempfile.mkdtemp(prefix="src.", dir=directory))
        for name, f in files.items():
            (fresh / name).parent.mkdir(parents=True, exist_ok=True)
            (fresh / name).write_bytes(f.read_bytes())
        try:
            os.replace(fresh, staged)
        except OSError:
            if not staged.is_dir():
                raise
            shutil.rmtree(fresh, ignore_errors=True)  # another builder staged the same files first
    return [str(staged / p.name) for p in _source_paths(sources)]


@contextlib.contextmanager
def one_builder(directory: Path):
    """Builds of one directory one at a time, under an flock that the kernel
    drops when its holder dies. Its holder knows that a torch `lock` file left in
    the directory is stale (its builder was killed: a Snakemake run or a SLURM
    job killed mid-build), and removes it; torch would wait on it until the
    build's time limit. Where the filesystem has no flock, torch's own lock alone."""
    try:
        fd = os.open(directory / ".builder.flock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        yield
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            yield
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(directory / "lock")
        yield
    finally:
        os.close(fd)  # releases the flock


class BuildHooks:
    def __init__(self, build_root: str | os.PathLike, channel: Any, cuda_arch: str | None,
                 perturber: Any = None):
        self.root = Path(build_root)
        self.perturber = perturber
        self.channel = channel
        self.cuda_arch = cuda_arch
        self.records: list[dict[str, Any]] = []
        self.failures: dict[int, dict[str, Any]] = {}
        self.modules: list[Any] = []
        self._real = {"load_inline": cpp_extension.load_inline, "load": cpp_extension.load}
        # Set by the worker once the evaluation holds the device: a build from then on is
        # compiler time on the device's clock, which building ahead (untrusted/ahead.py) avoids.
        self.device_held = False

    def install(self) -> "BuildHooks":
        # torch writes `-L<its lib directory>` into the link line unquoted: a
        # torch installed under a path with spaces could link nothing.
        if " " in cpp_extension.TORCH_LIB_PATH and not cpp_extension.TORCH_LIB_PATH.startswith("'"):
            cpp_extension.TORCH_LIB_PATH = shlex.quote(cpp_extension.TORCH_LIB_PATH)
        cpp_extension.load_inline = self._wrap("load_inline")
        cpp_extension.load = self._wrap("load")
        return self

    @property
    def module_names(self) -> frozenset[str]:
        return frozenset(getattr(m, "__name__", "") for m in self.modules)

    @property
    def compile_s(self) -> float:
        return sum(r["seconds"] for r in self.records)

    def _wrap(self, function: str):
        real = self._real[function]
        signature = inspect.signature(real)
        hooks = self

        def build(*args: Any, **kwargs: Any):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError:
                return real(*args, **kwargs)  # let torch raise its own TypeError
            arguments = dict(bound.arguments)
            try:
                staged = staged_files(arguments.get("sources")) if function == "load" else None
                key = extension_key(function, arguments, hooks.cuda_arch, staged)
            except OSError:
                return real(*args, **kwargs)  # unreadable sources: torch reports it
            directory = hooks.root / "ext" / key[:24]
            directory.mkdir(parents=True, exist_ok=True)
            arguments["build_directory"] = str(directory)
            name = str(arguments.get("name"))
            cached = any(directory.glob(f"{name}*.so"))
            record: dict[str, Any] = {"function": function, "name": name, "key": key,
                                      "directory": str(directory), "cached": cached,
                                      "in_hold": hooks.device_held}
            known = _known_failure(directory)
            if known is not None:
                # The compile step (or an earlier evaluation) already saw this exact
                # build fail with compiler errors: fail the same way without recompiling.
                exc = RuntimeError(f"Error building extension '{name}' (cached failure): {known['output']}")
                record.update(ok=False, seconds=0.0, kind="compile", exception="RuntimeError",
                              output=known["output"], cached=True, **_why_it_failed(known["output"]))
                hooks.records.append(record)
                hooks.failures[id(exc)] = record
                hooks.channel.send("build_end", name=name, ok=False, seconds=0.0, cached=True)
                raise exc
            hooks.channel.send("build_start", name=name, key=key, directory=str(directory))
            t0 = time.monotonic()
            try:
                with one_builder(directory):
                    if staged is not None:
                        arguments["sources"] = _stage(directory, staged, arguments["sources"])
                    module = real(**arguments)
            except BaseException as exc:
                output = str(exc)[-60000:]
                record.update(ok=False, seconds=time.monotonic() - t0, kind=failure_kind(exc),
                              exception=type(exc).__name__, output=output, **_why_it_failed(output))
                hooks.records.append(record)
                hooks.failures[id(exc)] = record
                hooks.channel.send("build_end", name=name, ok=False, seconds=record["seconds"])
                if record["kind"] == "compile":
                    _remember_failure(directory, record["output"])
                raise
            record.update(ok=True, seconds=time.monotonic() - t0)
            hooks.records.append(record)
            if not isinstance(module, str):
                hooks.modules.append(module)
                if hooks.perturber is not None:
                    module = hooks.perturber.wrap(module)
            hooks.channel.send("build_end", name=name, ok=True, seconds=record["seconds"], cached=cached)
            return module

        build.__name__ = function
        build.__doc__ = real.__doc__
        return build

    def summary(self) -> list[dict[str, Any]]:
        """Build records without the (long) compiler output (a failed build keeps
        its `error` line: a candidate may catch the failure and fall back)."""
        return [{k: v for k, v in r.items() if k != "output"} for r in self.records]
