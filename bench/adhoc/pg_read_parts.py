"""Where PostgreSQL recall and page time goes: each part beside one psycopg round trip.

    python bench/adhoc/pg_read_parts.py [--size 10000] [--profile recall|page|append]

Starts a throwaway cluster (or uses ``PRISM_TEST_POSTGRES_URL``), loads the bench
transcript into a store, then prints medians (µs) measured side by side in one run: one
``SELECT 1`` on an open connection, a pool checkout + ``SELECT 1``, the public recall and
page, and the store calls under them. ``--profile`` adds a cProfile of one workload.
A script that prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
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
from prism_om.testing.postgres_cluster import (
    throwaway_cluster,
    with_fresh_schema,
)

N = 400


async def median_us(call: Callable[[], Awaitable[Any]], n: int = N) -> float:
    for _ in range(20):
        await call()
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


async def main(base: str, size: int, profile: str | None) -> None:
    url = with_fresh_schema(base, f"parts_{size}_{os.getpid()}")
    dataset = build_dataset(size)
    store: Any = await open_store(url)
    for i in range(0, size, 1000):
        await store.append_many(dataset.entries[i : i + 1000])
    cursor = dataset.middle_message_id()
    memory_id, source_id = dataset.middle_memory_id()
    pool = store._pool

    async with pool.connection() as raw:

        async def select_one() -> object:
            return await (await raw.execute("SELECT 1")).fetchall()

        rtt = await median_us(select_one)

    async def pool_one() -> object:
        async with pool.connection() as c:
            return await (await c.execute("SELECT 1")).fetchall()

    calls: dict[str, Callable[[], Awaitable[Any]]] = {
        "pool checkout + SELECT 1": pool_one,
        "recall (public)": lambda: recall_observational_memory(
            store, memory_id, session_id=SESSION_ID
        ),
        "  store.memory_subset": lambda: store.memory_subset(SESSION_ID, [memory_id]),
        "  store.get_many(1)": lambda: store.get_many([source_id]),
        "page of 20 (public)": lambda: recall_observational_memory_branch_page(
            store, cursor, session_id=SESSION_ID, limit=20
        ),
        "  store.page_messages": lambda: store.page_messages(SESSION_ID, cursor, 20, "forward"),
        "  store.leaf": lambda: store.leaf(SESSION_ID),
    }
    print(f"size {size:,}   SELECT 1 on an open connection: {rtt:7.1f} us")
    for name, call in calls.items():
        took = await median_us(call)
        print(f"{name:<32} {took:8.1f} us  {took / rtt:5.2f}x")
    extra = continuation(dataset, 2000, "x")
    batches = [extra[i : i + 100] for i in range(0, 2000, 100)]
    samples = []
    for batch in batches:
        started = time.perf_counter_ns()
        await store.append_many(batch)
        samples.append(time.perf_counter_ns() - started)
    took = statistics.median(samples) / 1000
    print(f"{'append_many(100)':<32} {took:8.1f} us  {took / rtt:5.2f}x")
    if profile:
        fn = {
            "recall": calls["recall (public)"],
            "page": calls["page of 20 (public)"],
        }[profile]
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(2000):
            await fn()
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--profile", choices=["recall", "page"], default=None)
    args = parser.parse_args()
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        asyncio.run(main(os.environ["PRISM_TEST_POSTGRES_URL"], args.size, args.profile))
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(base_url, args.size, args.profile))
