"""Tasks from the Hugging Face dataset `ScalingIntelligence/KernelBench`.

The dataset keeps one parquet file (or a few shards) per split `level_<N>`,
with columns `code`, `level`, `name`, `problem_id`. The main branch stores them
as `data/level_1-00000-of-00001.parquet`; the Hub's converted branch as
`default/level_1/0000.parquet`. Split files are found by path pattern, so
either layout (and a plain folder of such files, `tasks.path`) is read.

Network use: `fetch` and `problem` go through `snapshot_download`, which falls
back to the local HF cache when the Hub cannot be reached or HF_HUB_OFFLINE=1;
a revision pinned to a commit is read from the cache without asking the Hub
when the cache holds it complete. `catalog` (planning) reads the cache only and never contacts the Hub.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

from kernelsweep.tasks.errors import TaskSourceError
from kernelsweep.tasks.ids import format_task_id
from kernelsweep.tasks.problem import Problem, normalize_name

DEFAULT_REPO = "ScalingIntelligence/KernelBench"
REQUIRED_COLUMNS = ("code", "name", "problem_id")


def split_name(level: int) -> str:
    return f"level_{level}"


def split_patterns(level: int) -> list[str]:
    """`allow_patterns` for snapshot_download (fnmatch: `*` crosses `/`)."""
    s = split_name(level)
    return [f"*{s}-*.parquet", f"*{s}/*.parquet", f"*{s}.parquet"]


def _split_regex(level: int) -> re.Pattern:
    # A path segment that is the split name followed by `/`, `-shard…` or
    # `.parquet`: level_1 must not pick up level_10's files.
    s = re.escape(split_name(level))
    return re.compile(rf"(?:.*/)?{s}(?:/.*|-[^/]*|)\.parquet")


def find_split_files(root: Path, level: int) -> list[Path]:
    pattern = _split_regex(level)
    return sorted(
        p for p in root.rglob("*.parquet")
        if not any(part.startswith(".") for part in p.relative_to(root).parts)
        and pattern.fullmatch(p.relative_to(root).as_posix())
    )


def read_split(root: Path, level: int, where: str) -> dict[int, tuple[str, str]]:
    """`{problem_id: (name, code)}` of one split under `root`."""
    import pyarrow.parquet as pq

    files = find_split_files(root, level)
    if not files:
        raise TaskSourceError(
            f"{where} has no parquet file for split {split_name(level)} "
            f"(looked for {', '.join(split_patterns(level))} under {root})"
        )
    rows: dict[int, tuple[str, str]] = {}
    for path in files:
        try:
            table = pq.read_table(path)
        except Exception as e:  # corrupt or truncated download: say which file
            raise TaskSourceError(f"cannot read {path}: {type(e).__name__}: {e}") from None
        missing = [c for c in REQUIRED_COLUMNS if c not in table.column_names]
        if missing:
            raise TaskSourceError(
                f"{path}: missing column(s) {missing}; found {table.column_names}"
            )
        for row in table.to_pylist():
            if row.get("level") is not None and int(row["level"]) != level:
                raise TaskSourceError(
                    f"{path}: a row of split {split_name(level)} says level {row['level']}"
                )
            pid, name, code = int(row["problem_id"]), normalize_name(str(row["name"])), row["code"]
            if pid in rows and rows[pid] != (name, code):
                raise TaskSourceError(
                    f"{where}: problem {pid} of {split_name(level)} appears twice with different code"
                )
            rows[pid] = (name, code)
    return rows


class HubSource:
    kind = "hub"

    def __init__(self, repo: str = DEFAULT_REPO, revision: str | None = None,
                 path: Path | None = None, cache_dir: Path | None = None):
        self.repo = repo
        self.revision = revision
        self.path = path  # a local folder of parquet files: no Hub, no cache
        self.cache_dir = cache_dir

    def snapshot(self, levels: list[int], *, cache_only: bool) -> tuple[Path, str | None]:
        """The folder holding the split files and the commit it is at."""
        if self.path is not None:
            if not self.path.is_dir():
                raise TaskSourceError(f"hub parquet folder not found: {self.path} (tasks.path)")
            return self.path, self.revision
        return _snapshot(self.repo, self.revision, self.cache_dir, tuple(sorted(levels)), cache_only)

    def fetch(self, levels: list[int]) -> tuple[Path, str | None]:
        """Download the splits into the HF cache (or find them there offline)
        and check that each one is readable."""
        folder, commit = self.snapshot(levels, cache_only=False)
        for level in levels:
            read_split(folder, level, self._where(commit))
        return folder, commit

    def catalog(self, levels: list[int]) -> dict[tuple[int, int], str]:
        folder, commit = self.snapshot(levels, cache_only=True)
        return {
            (level, pid): name
            for level in levels
            for pid, (name, _) in read_split(folder, level, self._where(commit)).items()
        }

    def problem(self, level: int, problem_id: int) -> Problem:
        folder, commit = self.snapshot([level], cache_only=False)
        rows = read_split(folder, level, self._where(commit))
        if problem_id not in rows:
            raise TaskSourceError(
                f"{format_task_id(level, problem_id)}: split {split_name(level)} of {self._where(commit)} "
                f"has no problem {problem_id} (ids {min(rows)}-{max(rows)})"
            )
        name, code = rows[problem_id]
        location = str(self.path) if self.path is not None else self.repo
        return Problem(level, problem_id, name, code, {"kind": self.kind, "location": location, "revision": commit})

    def _where(self, commit: str | None) -> str:
        if self.path is not None:
            return str(self.path)
        return f"{self.repo}@{commit}" if commit else self.repo


_COMMIT = re.compile(r"[0-9a-f]{40}")


@lru_cache(maxsize=None)
def _snapshot(repo: str, revision: str | None, cache_dir: Path | None,
              levels: tuple[int, ...], cache_only: bool) -> tuple[Path, str]:
    # Memoised: materialising many tasks in one process asks the Hub once.
    from huggingface_hub import errors as hf_errors
    from huggingface_hub import snapshot_download

    # IncompleteSnapshotError only exists in recent huggingface-hub releases.
    not_cached = (hf_errors.LocalEntryNotFoundError,
                  getattr(hf_errors, "IncompleteSnapshotError", hf_errors.LocalEntryNotFoundError))
    rev = revision or "main"
    if not cache_only and revision and _COMMIT.fullmatch(revision):
        # A commit never changes: its complete copy in the cache is the answer, with no
        # network round trip (an unreachable Hub costs ~20 s of retries per process).
        try:
            return _snapshot(repo, revision, cache_dir, levels, True)
        except TaskSourceError:
            pass
    try:
        folder = snapshot_download(
            repo, repo_type="dataset", revision=revision, cache_dir=cache_dir,
            allow_patterns=[p for level in levels for p in split_patterns(level)],
            local_files_only=cache_only,
        )
    except not_cached as e:
        unreachable = None if cache_only else e.__cause__
        raise TaskSourceError(_not_cached_message(repo, revision, cache_dir, levels, unreachable)) from None
    except hf_errors.RevisionNotFoundError:
        raise TaskSourceError(f"dataset {repo} has no revision {rev!r} (tasks.revision)") from None
    except (hf_errors.RepositoryNotFoundError, hf_errors.GatedRepoError) as e:
        raise TaskSourceError(
            f"dataset {repo} not found or not accessible on the Hub (tasks.repo): {_first_line(e)}"
        ) from None
    except Exception as e:  # HTTP errors, proxy errors, a full disk…: one clear line
        raise TaskSourceError(
            f"could not fetch dataset {repo} (revision {rev}): {type(e).__name__}: {_first_line(e)}"
        ) from None
    folder = Path(folder)
    return folder, folder.name  # cache snapshots are named by commit hash


def _not_cached_message(repo: str, revision: str | None, cache_dir: Path | None,
                        levels: tuple[int, ...], unreachable: BaseException | None) -> str:
    from huggingface_hub import constants as hf_constants

    fetch = " ".join([
        "kernelsweep tasks fetch --source hub",
        *([f"--repo {repo}"] if repo != DEFAULT_REPO else []),
        *([f"--revision {revision}"] if revision else []),
        f"--levels {','.join(map(str, levels))}",
        *([f"--cache-dir {cache_dir}"] if cache_dir else []),
    ])
    why = "" if unreachable is None else (
        f"the Hub could not be reached ({type(unreachable).__name__}: {_first_line(unreachable)}) and "
    )
    return (
        f"dataset {repo} (revision {revision or 'main'}, {', '.join(split_name(l) for l in levels)}): "
        f"{why}no complete copy in {cache_dir or hf_constants.HF_HUB_CACHE}. Fix: run `{fetch}` with "
        "network access (later runs, HF_HUB_OFFLINE=1 included, then use the cache), "
        "or set tasks.path to a folder of its parquet files"
    )


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__
