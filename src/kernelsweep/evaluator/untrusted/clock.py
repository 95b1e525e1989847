"""The timing protocol (worker side), for candidates, references and baselines.

Per timed call: flush the cache by writing a buffer several times its size,
record the start event, call, record the end event on the same stream;
`after` runs next (outside the measured span: the candidate worker clones
the output there, so work still pending elsewhere when the end event fires
is not in the clone). One device synchronize ends a block of calls, not
each call, so the harness adds next to nothing to a call's time.

Work a call leaves running on another stream or thread would escape the
end event; `synchronized=True` measures the old way (synchronize the whole
device before the end event), which the harness uses on sentinel calls to
find such work and, when it is found, for the whole timing of both sides.
On the CPU the same protocol runs with time.perf_counter_ns. All primitives
are captured when this module is imported, before any candidate code runs,
and read from this module's globals, not from the Clock instance: a
candidate can reach the instance through the frames of its own calls, and
what it could rebind here the guard's snapshot of the harness's modules
sees (untrusted/guard.py)."""

from __future__ import annotations

import time
from typing import Any, Callable

import torch

_MIB = 1 << 20
_NS = time.perf_counter_ns
_EVENT = torch.cuda.Event
_RECORD = torch.cuda.Event.record
_ELAPSED = torch.cuda.Event.elapsed_time
_SYNC = torch.cuda.synchronize
_EMPTY = torch.empty
_FILL = torch.Tensor.fill_


class Clock:
    def __init__(self, device: torch.device, cache_bytes: int | None = None, *, flush_bytes: int | None = None):
        """Flushes a buffer sized from the device's cache (`cache_bytes`), or
        exactly `flush_bytes` (another worker's clock's, for the same flush)."""
        self.device = device
        self._cuda = device.type == "cuda"
        if self._cuda:
            flush = max(4 * (cache_bytes or 50 * _MIB), 256 * _MIB)
        else:
            # Twice the cache, within bounds: some hosts report a last-level
            # cache of hundreds of MiB, and writing that per call costs more
            # than the calls being timed.
            flush = min(max(2 * (cache_bytes or 32 * _MIB), 16 * _MIB), 64 * _MIB)
        self.flush_bytes = flush = flush if flush_bytes is None else flush_bytes
        self._buffer = _EMPTY(flush, dtype=torch.uint8, device=device)
        self._value = 0
        # How the last block was timed (events or the host's timer) and how much
        # each flush wrote: what a candidate could change on this instance, for the
        # parent to check against the device and the flush size it knows.
        self.used: dict[str, Any] = {}

    def flush(self) -> None:
        self._value ^= 1
        _FILL(self._buffer, self._value)

    def sync(self) -> None:
        if self._cuda:
            _SYNC()

    def block(self, fn: Callable[..., Any], calls: list[list], *, synchronized: bool = False,
              after: Callable[[int, Any], None] | None = None) -> list[float]:
        """Milliseconds of fn(*args) for each args in `calls`, in order."""
        flushed = self._buffer.numel()
        if not self._cuda:
            out_ms = []
            for i, args in enumerate(calls):
                self.flush()
                t0 = _NS()
                out = fn(*args)
                t1 = _NS()
                if after is not None:
                    after(i, out)
                del out
                out_ms.append((t1 - t0) / 1e6)
            self.used = {"events": False, "flushed_bytes": flushed}
            return out_ms
        events = []
        for i, args in enumerate(calls):
            start, end = _EVENT(enable_timing=True), _EVENT(enable_timing=True)
            self.flush()
            if synchronized:
                _SYNC()
            _RECORD(start)
            out = fn(*args)
            if synchronized:
                _SYNC()
            _RECORD(end)
            if after is not None:
                after(i, out)
            del out
            events.append((start, end))
        _SYNC()
        self.used = {"events": True, "flushed_bytes": flushed}
        return [float(_ELAPSED(s, e)) for s, e in events]


def pool_size(set_bytes: int, wanted: int, budget: int) -> int:
    """How many distinct input sets to pre-generate: all of them if they fit
    the budget, never fewer than two."""
    if set_bytes <= 0:
        return max(2, min(wanted, 64))
    return max(2, min(wanted, budget // set_bytes))


def interleaved(calls: list[Callable[..., Any]], pool: list[list], *, clock: Clock, warmup: int,
                trials: int) -> list[list[float]]:
    """Time each callable `trials` times after `warmup` discarded rounds, call
    by call in one process, alternating their order (baselines)."""
    samples: list[list[float]] = [[] for _ in calls]
    with torch.no_grad():
        for i in range(warmup + trials):
            args = pool[i % len(pool)]
            order = range(len(calls)) if i % 2 == 0 else reversed(range(len(calls)))
            for j in order:
                ms = clock.block(calls[j], [args])[0]
                if i >= warmup:
                    samples[j].append(ms)
    return samples
