"""Paired rounds: calls timed beside each other round by round, ratios taken per round.

A ratio of two medians measured one after the other carries whatever the machine did in
between: on a shared 2-core machine the driver's round trip and a read taken a second
apart can each move 2x, so the ratio moves with them. Here every round times one block
of each arm in turn, the arm that goes first rotating from round to round, and a ratio
is taken inside a round (``call_r / rtt_r``): the figure is the median of those ratios.
CPU time (``time.process_time``: every thread of the process, so a driver's worker
thread counts) is taken beside the wall time of each block.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any

from .model import Result

__all__ = [
    "PAIRED_ROUNDS",
    "Arm",
    "AsyncFn",
    "Clocks",
    "RoundTrip",
    "interleaved",
    "paired_reads",
    "ratio_key",
    "ratios",
]

AsyncFn = Callable[[], Awaitable[Any]]

# Rounds per pairing: enough for a median of ratios that one noisy round cannot move.
PAIRED_ROUNDS = 15
# A warm-up stops after this many calls even if it has not lasted a block yet.
_MAX_WARMUP_CALLS = 10_000


@dataclass(frozen=True)
class Clocks:
    """Where time is read; a test passes clocks it drives itself."""

    wall: Callable[[], float] = time.perf_counter
    cpu: Callable[[], float] = time.process_time


@dataclass
class Arm:
    """Seconds per call of one arm, one number per round, wall and CPU."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class RoundTrip:
    """A driver round trip a read is judged against, and the load it is taken under."""

    system: str
    call: AsyncFn
    load: Callable[[], AbstractContextManager[object]]
    note: str


def ratio_key(reference: str) -> str:
    """The ``Result.extra`` key of the median ratio to ``reference``'s round trip."""
    return f"x {reference}"


def ratios(numerator: Arm, denominator: Arm) -> list[float]:
    """Wall-time ratios, one per round."""
    return [n / d for n, d in zip(numerator.wall, denominator.wall, strict=True)]


async def _calls_per_block(fn: AsyncFn, min_block_s: float, clocks: Clocks) -> int:
    """Warm ``fn`` up for one block's time, and the calls a block then needs."""
    calls = 0
    started = clocks.wall()
    while True:
        await fn()
        calls += 1
        spent = clocks.wall() - started
        if spent >= min_block_s or calls >= _MAX_WARMUP_CALLS:
            break
    return max(1, round(min_block_s / max(spent / calls, 1e-9)))


async def interleaved(
    arms: Mapping[str, AsyncFn],
    rounds: int,
    *,
    min_block_s: float = 0.02,
    calls: int | None = None,
    clocks: Clocks | None = None,
) -> dict[str, Arm]:
    """Time a block of every arm per round, the first arm rotating from round to round.

    A block is ``calls`` calls, or as many as last ``min_block_s`` after a warm-up of
    that long (each arm its own count); its figure is seconds per call.
    """
    clocks = clocks or Clocks()
    names = list(arms)
    if calls is None:
        inner = {n: await _calls_per_block(arms[n], min_block_s, clocks) for n in names}
    else:
        for name in names:
            await arms[name]()
        inner = dict.fromkeys(names, calls)
    out = {name: Arm() for name in names}
    gc.collect()
    for r in range(rounds):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            fn, n = arms[name], inner[name]
            wall, cpu = clocks.wall(), clocks.cpu()
            for _ in range(n):
                await fn()
            out[name].wall.append((clocks.wall() - wall) / n)
            out[name].cpu.append((clocks.cpu() - cpu) / n)
    return out


async def paired_reads(
    reads: Mapping[str, tuple[AsyncFn, str]],
    trips: Sequence[RoundTrip],
    system: str,
    size: int,
    *,
    rounds: int = PAIRED_ROUNDS,
    min_block_s: float = 0.02,
    clocks: Clocks | None = None,
) -> list[Result]:
    """Each read paired with each round trip (under that trip's load), one Result each.

    A read's samples are its per-round times beside the first trip; ``extra`` holds its
    median CPU time per call (``cpu``) and, per trip, the median of its per-round ratios
    (``ratio_key(trip.system)``). Each trip gets an ``rtt`` Result of every round it ran.
    """
    read_results = {
        key: Result(key, system, size, [], note=note) for key, (_, note) in reads.items()
    }
    trip_arms: dict[str, Arm] = {}
    for i, trip in enumerate(trips):
        every = trip_arms.setdefault(trip.system, Arm())
        with trip.load():
            for key, (fn, _) in reads.items():
                arms = await interleaved(
                    {"rtt": trip.call, "call": fn},
                    rounds,
                    min_block_s=min_block_s,
                    clocks=clocks,
                )
                result = read_results[key]
                result.extra[ratio_key(trip.system)] = statistics.median(
                    ratios(arms["call"], arms["rtt"])
                )
                if i == 0:
                    result.samples = arms["call"].wall
                    result.extra["cpu"] = statistics.median(arms["call"].cpu)
                every.wall += arms["rtt"].wall
                every.cpu += arms["rtt"].cpu
    out = list(read_results.values())
    for trip in trips:
        arm = trip_arms[trip.system]
        out.append(
            Result(
                "rtt",
                trip.system,
                size,
                arm.wall,
                note=trip.note,
                extra={"cpu": statistics.median(arm.cpu)},
            )
        )
    return out
