"""Where PostgreSQL recall and page time goes: each part beside one psycopg round trip.

    python bench/adhoc/pg_read_parts.py [--size 10000] [--rounds 8] [--profile recall|page]

Starts a throwaway cluster (or uses ``PRISM_TEST_POSTGRES_URL``), loads the bench
transcript into a store, then measures every part in alternating rounds (each round runs
each part 150 times; medians of the rounds' medians, wall and CPU µs per call):

- ``SELECT 1`` on an open cursor: the round trip the targets are judged against;
- recall's statement alone on that cursor (what the server and the driver cost), and the
  same followed by ``json.loads`` of the bodies: the cheapest client there could be;
- the store's read, ``_recall_rows`` and the public recall: what the library adds;
- the recall's Python alone on rows already fetched, warm (the same rows each call) and
  right after a ``SELECT 1``: the second shows what the same code costs once the driver
  and the server have run in between (caches no longer hold it), as it does in a recall;
- the page of 20 and its store calls, and ``append_many`` of 100.

``--profile`` adds a cProfile of one workload. A script that prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench.data import SESSION_ID, build_dataset, continuation
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import open_store
from prism_om.stores.postgres.reads import MEMORY_SUBSET_SQL
from prism_om.testing.postgres_cluster import (
    throwaway_cluster,
    with_fresh_schema,
)

CALLS = 150

Call = Callable[[], Awaitable[Any]]


async def alternate(calls: dict[str, Call], rounds: int) -> dict[str, tuple[float, float]]:
    """(wall, CPU) µs per call of each part: parts alternate within each round."""
    wall: dict[str, list[float]] = {name: [] for name in calls}
    cpu: dict[str, list[float]] = {name: [] for name in calls}
    for call in calls.values():
        for _ in range(30):
            await call()
    for _ in range(rounds):
        for name, call in calls.items():
            samples = []
            started_cpu = time.process_time()
            for _ in range(CALLS):
                started = time.perf_counter_ns()
                await call()
                samples.append(time.perf_counter_ns() - started)
            cpu[name].append((time.process_time() - started_cpu) / CALLS * 1e6)
            wall[name].append(statistics.median(samples) / 1000)
    return {n: (statistics.median(wall[n]), statistics.median(cpu[n])) for n in calls}


async def main(base: str, size: int, rounds: int, profile: str | None) -> None:
    url = with_fresh_schema(base, f"parts_{size}_{os.getpid()}")
    dataset = build_dataset(size)
    store: Any = await open_store(url)
    for i in range(0, size, 1000):
        await store.append_many(dataset.entries[i : i + 1000])
    cursor = dataset.middle_message_id()
    memory_id, source_id = dataset.middle_memory_id()
    reader = store._pool_reader()
    sql = MEMORY_SUBSET_SQL[("one", "session", store._has_supersessions)]
    params = {"session_id": SESSION_ID, "id": memory_id}
    fetched = await reader.fetch_native(sql, params, bounded=True)
    read = reader.fetch_native

    async def recall() -> object:
        return await recall_observational_memory(store, memory_id, session_id=SESSION_ID)

    async def recall_on_fetched_rows() -> object:
        async def same_rows(*_: Any, **__: Any) -> list[Any]:
            return fetched

        reader.fetch_native = same_rows
        try:
            return await recall()
        finally:
            reader.fetch_native = read

    async with store._pool.connection() as raw:
        cur = raw.cursor(binary=True)

        async def select_one() -> object:
            await cur.execute("SELECT 1", prepare=True)
            return await cur.fetchall()

        async def statement() -> list[Any]:
            await cur.execute(sql, params, prepare=True)
            return await cur.fetchall()

        async def statement_and_loads() -> object:
            return [json.loads(row[6]) for row in await statement()]

        async def select_one_then_python() -> object:
            await select_one()
            return await recall_on_fetched_rows()

        calls: dict[str, Call] = {
            "SELECT 1 (open cursor)": select_one,
            "recall statement alone": statement,
            "  + json.loads (ideal client)": statement_and_loads,
            "store read (fetch_native)": lambda: read(sql, params, bounded=True),
            "store._recall_rows": lambda: store._recall_rows(SESSION_ID, memory_id),
            "recall (public)": recall,
            "recall's Python alone, warm": recall_on_fetched_rows,
            "SELECT 1 + recall's Python": select_one_then_python,
            "page of 20 (public)": lambda: recall_observational_memory_branch_page(
                store, cursor, session_id=SESSION_ID, limit=20
            ),
            "  store.page_messages": lambda: store.page_messages(SESSION_ID, cursor, 20, "forward"),
            "  store.leaf": lambda: store.leaf(SESSION_ID),
            "pool checkout + SELECT 1": lambda: pool_one(store),
            "store.get_many(1)": lambda: store.get_many([source_id]),
        }
        took = await alternate(calls, rounds)
    rtt = took["SELECT 1 (open cursor)"][0]
    print(f"size {size:,}, {rounds} rounds x {CALLS} calls; x = wall / SELECT 1's wall")
    print(f"{'part':<32} {'wall µs':>8} {'CPU µs':>8} {'x':>6}")
    for name, (wall, cpu) in took.items():
        print(f"{name:<32} {wall:8.1f} {cpu:8.1f} {wall / rtt:6.2f}")
    extra = continuation(dataset, 2000, "x")
    samples = []
    for i in range(0, 2000, 100):
        started = time.perf_counter_ns()
        await store.append_many(extra[i : i + 100])
        samples.append(time.perf_counter_ns() - started)
    print(f"{'append_many(100)':<32} {statistics.median(samples) / 1000:8.1f}")
    if profile:
        fn = {"recall": calls["recall (public)"], "page": calls["page of 20 (public)"]}[profile]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            await fn()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    await store.close()


async def pool_one(store: Any) -> object:
    async with store._pool.connection() as c:
        return await (await c.execute("SELECT 1")).fetchall()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--profile", choices=["recall", "page"], default=None)
    args = parser.parse_args()
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        asyncio.run(
            main(os.environ["PRISM_TEST_POSTGRES_URL"], args.size, args.rounds, args.profile)
        )
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(base_url, args.size, args.rounds, args.profile))
