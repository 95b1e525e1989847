"""Timing comparisons of a candidate against the baselines.

Against eager PyTorch the report uses the evaluator's own measurement (reference
and candidate interleaved in one process). Against every other baseline mode the
baseline stage timed the mode in another process, so absolute times are not
comparable; kernelsweep.core.metrics.anchored_comparison goes through the reference,
timed in both: (ref / candidate in the evaluator) / (eager / mode in the baseline
stage), where eager is the one timed interleaved with the mode in the mode's own
worker (`paired_eager_ms`), else (a record from before pairing, or cudnn-benchmark,
which cannot be paired) the eager mode's own worker. A mode with no eager to go
through has no comparison. "compile" is the torch.compile mode with the largest
speedup over its eager, so beating it means beating every torch.compile mode measured."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Mapping

from kernelsweep.core import metrics, verdict

BEST_COMPILE = "compile"  # column prefix of the comparison with the fastest torch.compile mode


def column_prefix(mode: str) -> str:
    return mode.replace("-", "_")


@dataclass
class Baseline:
    """One task's baseline record, reduced to what the comparisons need."""

    task: str
    samples: dict[str, list[float]] = field(default_factory=dict)  # usable modes only
    paired: dict[str, list[float]] = field(default_factory=dict)  # mode -> the eager samples timed beside it
    unusable: dict[str, str] = field(default_factory=dict)  # mode -> why it cannot be compared
    device_name: str | None = None
    precision: str | None = None

    @property
    def anchor(self) -> list[float] | None:
        """The eager mode's own samples (absolute times; the drift check)."""
        return self.samples.get("eager")

    def anchor_for(self, mode: str) -> list[float] | None:
        """The eager samples a comparison with `mode` goes through: those timed
        interleaved with it, else the eager mode's own (which carry drift)."""
        return self.paired.get(mode) or self.anchor

    def comparable(self, mode: str) -> bool:
        return mode != "eager" and mode in self.samples and self.anchor_for(mode) is not None

    def ratio(self, mode: str, margin: float = metrics.EQUIVALENCE_MARGIN) -> dict[str, Any] | None:
        """The mode's speedup over eager (eager / mode) with its interval and verdict, or None."""
        if not self.comparable(mode):
            return None
        return metrics.compare_timings(self.anchor_for(mode), self.samples[mode], margin)

    def best_compile_mode(self, compile_modes: tuple[str, ...]) -> str | None:
        """The mode with the largest median speedup over its eager (drift-free where paired)."""
        usable = [m for m in compile_modes if self.comparable(m)]
        if not usable:
            return None
        return max(usable, key=lambda m: metrics.speedup(self.anchor_for(m), self.samples[m]) or 0.0)


def parse_baseline(task: str, record: Mapping[str, Any], modes: tuple[str, ...]) -> Baseline:
    baseline = Baseline(task=task, device_name=record.get("device_name"), precision=record.get("precision"))
    recorded = record.get("modes") or {}
    for mode in modes:
        entry = recorded.get(mode)
        if not isinstance(entry, Mapping):
            baseline.unusable[mode] = "not measured"
            continue
        if entry.get("status") == "skipped":
            baseline.unusable[mode] = f"skipped: {entry.get('reason') or 'no reason given'}"
            continue
        if entry.get("error") or entry.get("status") == "failed":
            baseline.unusable[mode] = f"failed: {entry.get('error') or 'no message'}"
            continue
        samples = (entry.get("runtime_ms") or {}).get("samples") or []
        if len(samples) < 2:
            baseline.unusable[mode] = "fewer than 2 timing samples"
            continue
        baseline.samples[mode] = [float(x) for x in samples]
        paired = (entry.get("paired_eager_ms") or {}).get("samples") or []
        if len(paired) >= 2:
            baseline.paired[mode] = [float(x) for x in paired]
    return baseline


def _blank(prefix: str) -> dict[str, Any]:
    return {f"speedup_{prefix}": None, f"speedup_{prefix}_lo": None, f"speedup_{prefix}_hi": None,
            f"verdict_{prefix}": None, f"faster_{prefix}": None}


def _columns(prefix: str, comparison: Mapping[str, Any]) -> dict[str, Any]:
    ci = comparison.get("speedup_ci") or [None, None]
    return {f"speedup_{prefix}": comparison.get("speedup"), f"speedup_{prefix}_lo": ci[0],
            f"speedup_{prefix}_hi": ci[1], f"verdict_{prefix}": comparison.get("verdict"),
            f"faster_{prefix}": comparison.get("faster")}


def baseline_column_names(modes: tuple[str, ...]) -> list[str]:
    """The columns of the comparisons through eager: one prefix per mode, then the best compile mode."""
    names: list[str] = []
    for prefix in [*map(column_prefix, modes), BEST_COMPILE]:
        names += list(_blank(prefix))
    return names + ["best_compile_mode"]


def timing_column_names(modes: tuple[str, ...]) -> list[str]:
    return list(_blank("eager")) + baseline_column_names(modes)


def _compare(job: tuple[list[float], list[float], list[float], list[float], float]) -> dict[str, Any]:
    return metrics.anchored_comparison(*job)


class Comparator:
    """Fills the speedup columns of result rows. Against eager it copies the
    evaluator's measurement; the comparisons with the other modes (a bootstrap each)
    are queued and computed once per distinct pair by resolve(), in parallel when asked.
    metrics seeds every bootstrap itself, so order and process do not change a number."""

    PARALLEL_FROM = 64  # fewer comparisons are not worth starting processes

    def __init__(self, modes: tuple[str, ...], compile_modes: tuple[str, ...], margin: float):
        self.modes = modes  # every mode but eager: a column each
        self.compile_modes = compile_modes  # those the best torch.compile is chosen from
        self.margin = margin
        self._pending: dict[tuple, list[tuple[dict[str, Any], str]]] = {}
        self._pairs: dict[tuple, tuple[list[float], ...]] = {}  # ref, cand, eager, mode samples

    def fill(self, row: dict[str, Any], result: Mapping[str, Any] | None, baseline: Baseline | None) -> None:
        result = result or {}
        ci = result.get("speedup_ci") or [None, None]
        row.update({"speedup_eager": result.get("speedup"), "speedup_eager_lo": ci[0], "speedup_eager_hi": ci[1],
                    "verdict_eager": result.get("timing_verdict"), "faster_eager": result.get("faster")})
        for prefix in [*map(column_prefix, self.modes), BEST_COMPILE]:
            row.update(_blank(prefix))
        best = baseline.best_compile_mode(self.compile_modes) if baseline else None
        row["best_compile_mode"] = best
        # Only a numerically correct candidate's time means anything (a cheat's is not a speedup).
        timed = result.get("correct") is True and result.get("category") in verdict.NUMERICALLY_CORRECT
        samples = tuple((result.get("runtime_ms") or {}).get("samples") or ()) if timed else ()
        reference = tuple((result.get("ref_runtime_ms") or {}).get("samples") or ()) if timed else ()
        if baseline is None or len(samples) < 2 or len(reference) < 2:
            return
        wanted = [(mode, column_prefix(mode)) for mode in self.modes if baseline.comparable(mode)]
        if best is not None:
            wanted.append((best, BEST_COMPILE))
        for mode, prefix in wanted:
            key = (baseline.task, mode, samples, reference)
            self._pairs.setdefault(key, (list(reference), list(samples), baseline.anchor_for(mode),
                                         baseline.samples[mode]))
            self._pending.setdefault(key, []).append((row, prefix))

    def resolve(self, jobs: int = 1) -> None:
        """Compute every queued comparison and write it into its rows."""
        keys = list(self._pending)
        pairs = [(*self._pairs[k], self.margin) for k in keys]
        if jobs > 1 and len(keys) >= self.PARALLEL_FROM:
            with ProcessPoolExecutor(max_workers=jobs) as pool:
                results = list(pool.map(_compare, pairs, chunksize=max(1, len(pairs) // (8 * jobs))))
        else:
            results = [_compare(pair) for pair in pairs]
        for key, comparison in zip(keys, results):
            for row, prefix in self._pending[key]:
                row.update(_columns(prefix, comparison))
        self._pending.clear()
        self._pairs.clear()
