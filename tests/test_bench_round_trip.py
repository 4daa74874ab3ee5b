"""The bench pairs recall and page with the driver's round trip round by round: a ratio per
round, the median reported; the aiosqlite round trip idle and with a second core busy, the
SQLite targets judged against the larger of the two ratios. Clocks are scripted: no timing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from bench.floor import aiosqlite_round_trips
from bench.model import REFERENCE, REFERENCE_BUSY, Result
from bench.paired import Clocks, RoundTrip, interleaved, paired_reads, ratio_key
from bench.report import check_targets


class ScriptedClock:
    """Time moves only when a scripted call runs, by the duration scripted for it."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.calls: list[str] = []
        self.clocks = Clocks(wall=lambda: self.wall, cpu=lambda: self.cpu)

    def call(self, name: str, durations: list[float]) -> Callable[[], Awaitable[None]]:
        left = iter(durations)

        async def run() -> None:
            took = next(left)
            self.calls.append(name)
            self.wall += took
            self.cpu += took / 2

        return run


async def test_each_round_alternates_its_order_and_gives_one_ratio() -> None:
    clock = ScriptedClock()
    # The first duration of each is the warm-up; with no block length a block is one call.
    rtt = clock.call("rtt", [1.0, 10.0, 50.0, 20.0])
    read = clock.call("read", [1.0, 40.0, 50.0, 100.0])
    arms = await interleaved({"rtt": rtt, "read": read}, 3, min_block_s=0, clocks=clock.clocks)
    assert clock.calls == ["rtt", "read", "rtt", "read", "read", "rtt", "rtt", "read"]
    assert arms["rtt"].wall == [10.0, 50.0, 20.0]
    assert arms["read"].wall == [40.0, 50.0, 100.0]
    assert arms["read"].cpu == [20.0, 25.0, 50.0]


async def test_three_arms_rotate_which_goes_first() -> None:
    clock = ScriptedClock()
    arms = {name: clock.call(name, [1.0] * 4) for name in ("a", "b", "c")}
    await interleaved(arms, 3, min_block_s=0, clocks=clock.clocks)
    rounds = [clock.calls[i : i + 3] for i in range(3, 12, 3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]


async def test_a_read_reports_the_median_of_its_per_round_ratios() -> None:
    clock = ScriptedClock()
    trip = RoundTrip(
        REFERENCE, clock.call("rtt", [1.0, 10.0, 50.0, 20.0]), contextlib.nullcontext, "rtt"
    )
    read = clock.call("read", [1.0, 40.0, 50.0, 100.0])
    results = await paired_reads(
        {"recall": (read, "recall")},
        [trip],
        "sqlite",
        10_000,
        rounds=3,
        min_block_s=0,
        clocks=clock.clocks,
    )
    recall, rtt = results
    # Per round 4x, 1x, 5x: the median is 4x, where the ratio of the medians is 2.5x.
    assert recall.extra[ratio_key(REFERENCE)] == 4.0
    assert recall.samples == [40.0, 50.0, 100.0]
    assert recall.extra["cpu"] == 25.0
    assert (rtt.workload, rtt.system, rtt.samples) == ("rtt", REFERENCE, [10.0, 50.0, 20.0])


async def test_each_round_trip_pairs_under_its_own_load() -> None:
    clock = ScriptedClock()
    loads: list[str] = []

    @contextlib.contextmanager
    def busy() -> Iterator[None]:
        loads.append("busy on")
        yield
        loads.append("busy off")

    trips = [
        RoundTrip(REFERENCE, clock.call("idle", [1.0, 10.0, 10.0]), contextlib.nullcontext, ""),
        RoundTrip(REFERENCE_BUSY, clock.call("busy", [1.0, 4.0, 4.0]), busy, ""),
    ]
    read = clock.call("read", [1.0, 20.0, 20.0, 1.0, 20.0, 20.0])
    results = await paired_reads(
        {"page20": (read, "")}, trips, "sqlite", 10, rounds=2, min_block_s=0, clocks=clock.clocks
    )
    page = results[0]
    assert page.extra[ratio_key(REFERENCE)] == 2.0
    assert page.extra[ratio_key(REFERENCE_BUSY)] == 5.0
    # The read's own figure is its time beside the first (idle) round trip.
    assert page.samples == [20.0, 20.0]
    assert loads == ["busy on", "busy off"]
    assert [r.system for r in results[1:]] == [REFERENCE, REFERENCE_BUSY]


def _recall(ratio_idle: float, ratio_busy: float | None) -> bool | None:
    out = []
    for size in (10_000, 100_000):
        extra = {ratio_key(REFERENCE): ratio_idle, "cpu": 50e-6}
        if ratio_busy is not None:
            extra[ratio_key(REFERENCE_BUSY)] = ratio_busy
        out.append(Result("recall", "sqlite", size, [60e-6], extra=extra))
        # Round trips as fast as recall: a ratio of medians would call this 1.0x.
        out.append(Result("rtt", REFERENCE, size, [60e-6]))
        out.append(Result("rtt", REFERENCE_BUSY, size, [60e-6]))
    (recall,) = [
        t for t in check_targets(out, [10_000, 100_000]) if t.name.startswith("SQLite recall")
    ]
    return recall.met


def test_recall_is_judged_by_the_larger_paired_ratio() -> None:
    assert _recall(1.0, None) is True
    assert _recall(1.0, 2.6) is False
    assert _recall(2.6, 1.0) is False
    assert _recall(1.2, 1.4) is True


async def test_the_aiosqlite_round_trip_is_paired_idle_and_busy_on_two_cores(
    tmp_path: Path,
) -> None:
    async def read() -> None:
        return None

    async with aiosqlite_round_trips(str(tmp_path)) as trips:
        results = await paired_reads(
            {"recall": (read, "")}, trips, "sqlite", 10, rounds=2, min_block_s=0.001
        )
    expected = [REFERENCE, REFERENCE_BUSY] if (os.cpu_count() or 1) >= 2 else [REFERENCE]
    assert [t.system for t in trips] == expected
    assert [r.system for r in results if r.workload == "rtt"] == expected
    assert all(ratio_key(system) in results[0].extra for system in expected)
