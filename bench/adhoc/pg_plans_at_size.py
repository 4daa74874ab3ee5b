"""The page and recall statements' plans and server times at one size, and the public calls.

    python bench/adhoc/pg_plans_at_size.py 1000000

Builds the bench transcript at that size in a throwaway cluster (the store's own
``append_many`` of 1,000-entry batches), prints the tables' statistics, ``EXPLAIN
(ANALYZE, BUFFERS)`` of both statements under ``force_custom_plan`` and
``force_generic_plan``, then medians (µs) of the public page and recall, the lane set to
each ``plan_cache_mode`` in turn. A script that prints numbers, not a test.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench.data import SESSION_ID, build_dataset
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import open_store
from prism_om.stores.postgres.reads import MEMORY_SUBSET_SQL, PAGE_SQL
from prism_om.testing.postgres_cluster import throwaway_cluster, with_fresh_schema

STATS_SQL = (
    "SELECT relname, reltuples, last_analyze, last_autoanalyze FROM pg_class "
    "JOIN pg_stat_user_tables USING (relname) "
    "WHERE relname IN ('entries', 'om_observations', 'segments')"
)


async def median_us(call: Callable[[], Awaitable[Any]], n: int = 50) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


async def main(url: str, size: int) -> None:
    dataset = build_dataset(size)
    store: Any = await open_store(url)
    started = time.perf_counter()
    for i in range(0, size, 1000):
        await store.append_many(dataset.entries[i : i + 1000])
    print(f"built {size:,} in {time.perf_counter() - started:.0f} s", flush=True)
    cursor = dataset.middle_message_id()
    memory_id, _ = dataset.middle_memory_id()
    page = (
        PAGE_SQL[("forward", "session")],
        {"session_id": SESSION_ID, "leaf_id": None, "cursor": cursor, "want": 21},
    )
    recall = (
        MEMORY_SUBSET_SQL[("one", "session", store._has_supersessions)],
        {"session_id": SESSION_ID, "leaf_id": None, "id": memory_id, "ids": [memory_id]},
    )
    async with store._pool.connection() as conn:
        print(await (await conn.execute(STATS_SQL)).fetchall())
        for mode in ("force_custom_plan", "force_generic_plan"):
            await conn.execute(f"SET plan_cache_mode = {mode}")
            for name, (sql, params) in (("page", page), ("recall", recall)):
                explain = "EXPLAIN (ANALYZE, BUFFERS) " + sql
                rows = await (await conn.execute(explain, params, prepare=False)).fetchall()
                print(f"===== {name} {mode}")
                print("\n".join(row[0] for row in rows), flush=True)
        await conn.execute("RESET plan_cache_mode")

    async def public_page() -> Any:
        return await recall_observational_memory_branch_page(
            store, cursor, session_id=SESSION_ID, limit=20
        )

    async def public_recall() -> Any:
        return await recall_observational_memory(store, memory_id, session_id=SESSION_ID)

    for _ in range(10):
        await public_page()
        await public_recall()
    lane = store._reader._lane
    for mode in ("auto", "force_custom_plan", "force_generic_plan", "auto"):
        await lane.execute(f"SET plan_cache_mode = {mode}")
        took = await median_us(public_page), await median_us(public_recall)
        print(f"{mode:<20} page {took[0]:8.1f} µs  recall {took[1]:8.1f} µs", flush=True)
    await store.close()


if __name__ == "__main__":
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        base = os.environ["PRISM_TEST_POSTGRES_URL"]
        asyncio.run(main(with_fresh_schema(base, f"plans_{size}_{os.getpid()}"), size))
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(with_fresh_schema(base_url), size))
