"""The timing protocol (worker side), used for candidates and baselines.

Per timed call: flush the cache by writing a buffer several times its size,
synchronize the whole device, record the start event, call, synchronize the
whole device again (so work left on any stream, side streams included, is
inside the measurement), record the end event. On the CPU the same protocol
runs with time.perf_counter_ns. Inputs come from a pool generated before
timing and are cycled so consecutive calls never see the same tensors.
Several callables are interleaved call by call, alternating their order, so
drift (clocks, temperature, other jobs) hits them alike. All primitives are
captured when the Clock is built, before any candidate code runs."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

_MIB = 1 << 20


class Clock:
    def __init__(self, device: torch.device, cache_bytes: int | None):
        self.device = device
        self._ns = time.perf_counter_ns
        self._cuda = device.type == "cuda"
        if self._cuda:
            self._Event = torch.cuda.Event
            self._record = torch.cuda.Event.record
            self._elapsed = torch.cuda.Event.elapsed_time
            self._event_sync = torch.cuda.Event.synchronize
            self._sync = torch.cuda.synchronize
            flush = max(4 * (cache_bytes or 50 * _MIB), 256 * _MIB)
        else:
            # Twice the cache, within bounds: some hosts report a last-level
            # cache of hundreds of MiB, and writing that per call costs more
            # than the calls being timed.
            flush = min(max(2 * (cache_bytes or 32 * _MIB), 16 * _MIB), 64 * _MIB)
        self.flush_bytes = flush
        self._buffer = torch.empty(flush, dtype=torch.uint8, device=device)
        self._value = 0

    def flush(self) -> None:
        self._value ^= 1
        self._buffer.fill_(self._value)

    def measure(self, fn: Callable[..., Any], args: list) -> tuple[float, Any]:
        """Milliseconds of one call, and its output."""
        self.flush()
        if self._cuda:
            start = self._Event(enable_timing=True)
            end = self._Event(enable_timing=True)
            self._sync()
            self._record(start)
            out = fn(*args)
            self._sync()
            self._record(end)
            self._event_sync(end)
            return float(self._elapsed(start, end)), out
        t0 = self._ns()
        out = fn(*args)
        t1 = self._ns()
        return (t1 - t0) / 1e6, out


def pool_size(set_bytes: int, wanted: int, budget: int) -> int:
    """How many distinct input sets to pre-generate: all of them if they fit
    the budget, never fewer than two."""
    if set_bytes <= 0:
        return max(2, min(wanted, 64))
    return max(2, min(wanted, budget // set_bytes))


def interleaved(calls: list[Callable[..., Any]], pool: list[list], *, clock: Clock, warmup: int,
                trials: int, before: Callable[[int], None] | None = None,
                after: Callable[[int, Any], None] | None = None) -> list[list[float]]:
    """Time each callable `trials` times (after `warmup` discarded rounds)."""
    samples: list[list[float]] = [[] for _ in calls]
    with torch.no_grad():
        for i in range(warmup + trials):
            args = pool[i % len(pool)]
            order = range(len(calls)) if i % 2 == 0 else reversed(range(len(calls)))
            for j in order:
                if before is not None:
                    before(j)
                ms, out = clock.measure(calls[j], args)
                if after is not None:
                    after(j, out)
                del out
                if i >= warmup:
                    samples[j].append(ms)
    return samples
