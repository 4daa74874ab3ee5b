"""PostgreSQL recall, page and append_many of this tree beside an older one, interleaved.

    python bench/adhoc/pg_ab_figures.py [--rev 36fc767] [--size 10000] [--rounds 7]

The older tree (``git archive REV``) is imported as ``prism_om_old`` (its imports are
relative), so both run in one process on one server, each on its own copy of the bench
transcript (a schema each). Each round times every workload once per version, right
after one ``SELECT 1`` round trip, so a loaded machine slows both alike; the figures are
medians over rounds, and ratios are to the round trip of the same round. A script that
prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from bench.adhoc._ab import old_tree  # noqa: E402
from bench.data import SESSION_ID, build_dataset, continuation  # noqa: E402
from prism_om.testing.postgres_cluster import (  # noqa: E402
    throwaway_cluster,
    with_fresh_schema,
)

CALLS = 200  # per workload per round (appends: the batches of the round)


async def median_us(call: Callable[[], Awaitable[Any]], n: int = CALLS) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


async def main(base: str, rev: str, size: int, rounds: int) -> None:
    sys.path.insert(0, old_tree(rev))
    versions = {"new": "prism_om", "old": "prism_om_old"}
    dataset = build_dataset(size)
    extra = continuation(dataset, 100 * 2 * rounds * 3, "x")
    cursor = dataset.middle_message_id()
    memory_id, _ = dataset.middle_memory_id()
    stores: dict[str, Any] = {}
    fns: dict[str, dict[str, Callable[[], Awaitable[Any]]]] = {}
    for name, package in versions.items():
        stores_mod = importlib.import_module(f"{package}.stores")
        om = importlib.import_module(f"{package}.observational_memory")
        entries_mod = importlib.import_module(f"{package}.entries")
        url = with_fresh_schema(base, f"ab_{name}_{size}_{os.getpid()}")
        store = await stores_mod.open_store(url)
        own = [entries_mod.SessionEntry.model_validate(e.model_dump()) for e in dataset.entries]
        for i in range(0, size, 1000):
            await store.append_many(own[i : i + 1000])
        stores[name] = store
        fns[name] = {
            "recall": lambda s=store, om=om: om.recall_observational_memory(
                s, memory_id, session_id=SESSION_ID
            ),
            "page20": lambda s=store, om=om: om.recall_observational_memory_branch_page(
                s, cursor, session_id=SESSION_ID, limit=20
            ),
            "page_messages": lambda s=store: s.page_messages(SESSION_ID, cursor, 20, "forward"),
        }
        batches = [
            [entries_mod.SessionEntry.model_validate(e.model_dump()) for e in extra[i : i + 100]]
            for i in range(0, len(extra), 100)
        ]
        fns[name]["_batches"] = iter(batches)  # type: ignore[assignment]
    rtt_conn = await importlib.import_module("psycopg").AsyncConnection.connect(
        stores["new"]._pool.conninfo, autocommit=True
    )

    async def select_one() -> object:
        return await (await rtt_conn.execute("SELECT 1")).fetchall()

    table: dict[str, list[float]] = {}
    for _ in range(rounds):
        rtt = await median_us(select_one)
        table.setdefault("rtt", []).append(rtt)
        for workload in ("recall", "page20", "page_messages"):
            for name in versions:
                took = await median_us(fns[name][workload])
                table.setdefault(f"{workload} {name}", []).append(took)
                table.setdefault(f"{workload} {name} /rtt", []).append(took / rtt)
        for name in versions:
            batches: Any = fns[name]["_batches"]
            samples = []
            for _ in range(5):
                batch = next(batches)
                started = time.perf_counter_ns()
                await stores[name].append_many(batch)
                samples.append(time.perf_counter_ns() - started)
            table.setdefault(f"append_many(100) {name}", []).append(
                statistics.median(samples) / 1000
            )
    print(f"size {size:,}, {rounds} rounds, medians over rounds (µs; ratios per round)")
    for key, values in table.items():
        unit = "x" if key.endswith("/rtt") else " µs"
        print(f"  {key:<32} {statistics.median(values):9.2f}{unit}")
    await rtt_conn.close()
    for store in stores.values():
        await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", default="36fc767")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        url = os.environ["PRISM_TEST_POSTGRES_URL"]
        asyncio.run(main(url, args.rev, args.size, args.rounds))
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(base_url, args.rev, args.size, args.rounds))
