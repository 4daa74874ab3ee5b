"""Where the public recall and page of 20 spend their time on SQLite, part by part.

On one session (``ab_page_recall.session``, 10,000 entries by default): the aiosqlite round
trip (``execute_fetchall('SELECT 1')``) beside a bare hop (``conn._execute`` of a no-op),
then recall by id and the public page of 20 with per-part timestamps: the queue wait
before the reader thread starts the call, the work on that thread (its statements and
row parsing), the wait from its end until the event loop resumes, and what runs on the
loop. The parts are timed with ``perf_counter`` around the store's own methods, so they
add a little overhead of their own; the machine may be loaded by others: compare parts
within one run, not across runs.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import ab_page_recall

from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import open_store
from prism_om.stores.sqlite import hop_reads

PARTS: collections.Counter[str] = collections.Counter()


def instrument() -> None:
    """Time each hop's queue wait, thread work and return wait, and the statements."""
    original = hop_reads.on_thread
    fetch = hop_reads.OneHopReads._fetch

    async def on_thread(conn: Any, function: Callable[[Any], Any]) -> Any:
        queued = time.perf_counter()
        marks: dict[str, float] = {}

        def timed(raw: Any) -> Any:
            started = time.perf_counter()
            PARTS["queue wait"] += started - queued
            try:
                return function(raw)
            finally:
                marks["done"] = time.perf_counter()
                PARTS["on the thread"] += marks["done"] - started

        result = await original(conn, timed)
        PARTS["return wait"] += time.perf_counter() - marks["done"]
        return result

    async def timed_fetch(self: Any, sql: str, params: Any = ()) -> Any:
        started = time.perf_counter()
        try:
            return await fetch(self, sql, params)
        finally:
            PARTS["  statements"] += time.perf_counter() - started

    hop_reads.on_thread = on_thread  # type: ignore[assignment]
    hop_reads.OneHopReads._fetch = timed_fetch  # type: ignore[method-assign]


async def median_us(call: Callable[[], Awaitable[object]], rounds: int, calls: int) -> float:
    means = []
    for _ in range(rounds):
        started = time.perf_counter()
        for _ in range(calls):
            await call()
        means.append((time.perf_counter() - started) / calls * 1e6)
    return statistics.median(means)


async def main(entries_count: int, calls: int) -> None:
    ab_page_recall.ENTRIES = entries_count
    entries, memory_ids = ab_page_recall.session()
    with tempfile.TemporaryDirectory() as directory:
        async with await open_store(f"sqlite:{directory}/parts.db") as store:
            for start in range(0, entries_count, 1000):
                await store.append_many(entries[start : start + 1000])
            cursor = entries[entries_count // 2 + 1].id
            memory_id = memory_ids[len(memory_ids) // 2]
            conn = store._reader  # type: ignore[attr-defined]

            async def rtt() -> object:
                return await conn.execute_fetchall("SELECT 1")

            async def bare() -> object:
                return await conn._execute(lambda: None)

            async def recall() -> object:
                return await recall_observational_memory(store, memory_id, session_id="s")

            async def page() -> object:
                return await recall_observational_memory_branch_page(
                    store, cursor, session_id="s", limit=20
                )

            for call in (rtt, bare, recall, page):
                await median_us(call, 1, 300)
            base = await median_us(rtt, 7, calls)
            print(f"{entries_count:,} entries; aiosqlite round trip {base:.1f} µs")
            print(f"  bare hop (conn._execute): {await median_us(bare, 7, calls):.1f} µs")
            instrument()
            for name, call in (("recall by id", recall), ("page of 20", page)):
                PARTS.clear()
                took = await median_us(call, 1, calls)
                print(f"{name}: {took:.1f} µs = {took / base:.2f}x the round trip")
                inside = sum(PARTS.values()) - PARTS["  statements"]
                for part, seconds in PARTS.items():
                    print(f"  {part}: {seconds / calls * 1e6:.1f} µs")
                print(f"  on the loop (the rest): {took - inside / calls * 1e6:.1f} µs")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=2_000)
    args = parser.parse_args()
    asyncio.run(main(args.entries, args.calls))
