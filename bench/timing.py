"""Timing helpers: medians of repeated samples, each long enough to read a clock."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Timer", "sync", "time_calls"]

AsyncFn = Callable[[], Awaitable[Any]]


@dataclass(frozen=True)
class Timer:
    """How to sample one operation.

    ``repeat`` samples are taken after one warm-up call; each sample runs the operation
    enough times to last ``min_sample_s``, and an operation slower than ``budget_s`` over
    all its samples gets fewer (at least one, reusing the warm-up call when needed).
    """

    repeat: int = 5
    min_sample_s: float = 0.02
    budget_s: float = 30.0

    async def measure(self, fn: AsyncFn) -> list[float]:
        """Seconds per call of ``fn``, one number per sample."""
        start = time.perf_counter()
        await fn()
        first = time.perf_counter() - start
        inner = max(1, int(self.min_sample_s / max(first, 1e-9)))
        samples_wanted = self.repeat
        if first * self.repeat > self.budget_s:
            samples_wanted = max(1, int(self.budget_s / max(first, 1e-9)))
        if first > self.budget_s:
            return [first]
        samples: list[float] = []
        gc.collect()
        for _ in range(samples_wanted):
            start = time.perf_counter()
            for _ in range(inner):
                await fn()
            samples.append((time.perf_counter() - start) / inner)
        return samples


def sync(fn: Callable[[], Any]) -> AsyncFn:
    """Wrap a plain function for ``Timer.measure`` (the wrapper costs well under 1 µs)."""

    async def call() -> Any:
        return fn()

    return call


async def time_calls(
    calls: Sequence[AsyncFn], groups: int, budget_s: float | None = None
) -> tuple[list[float], int]:
    """Run ``calls`` in order, timing each; seconds per call, one mean per group.

    Calls that change state (appends) cannot repeat, so a fixed sample is split into
    ``groups`` consecutive groups. With ``budget_s`` the sample stops early once that much
    time went by (after at least ``groups`` calls); returns the samples and calls made.
    """
    durations: list[float] = []
    spent = 0.0
    gc.collect()
    for call in calls:
        start = time.perf_counter()
        await call()
        took = time.perf_counter() - start
        durations.append(took)
        spent += took
        if budget_s is not None and spent > budget_s and len(durations) >= groups:
            break
    size = max(1, len(durations) // groups)
    means = [
        sum(durations[i : i + size]) / len(durations[i : i + size])
        for i in range(0, size * groups, size)
        if durations[i : i + size]
    ]
    return means, len(durations)
