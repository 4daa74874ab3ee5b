"""``append_many`` of 100 against psycopg's own ``executemany`` of the same rows, paired.

    python bench/adhoc/pg_append_ratio.py [--sizes 10000,100000] [--pairs 200]

Issue 15's target: ``append_many`` of 100 ≤ 2x the driver's ``executemany`` of the same
rows. One median under a loaded machine cannot say met or missed, so this takes many
pairs: each pair appends one batch of 100 with the store and the same 100 entries with
the floor (``bench/pg.py``: encode + ``executemany`` + commit into the floor table), one
right after the other, alternating which goes first, each on top of the same prepared
transcript (a store and a floor table per size, on one throwaway server). It prints the
distribution of the per-pair ratio (median, quartiles, 10th/90th percentile, the share
of pairs ≤ 2x) and of each side. A script that prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench.data import build_dataset, continuation
from bench.floor import _rows
from bench.pg import _INSERT, _SCHEMA, _connect
from prism_om.stores import open_store
from prism_om.testing.postgres_cluster import throwaway_cluster, with_fresh_schema

BATCH = 100


def quantiles(values: list[float]) -> str:
    cuts = statistics.quantiles(values, n=20)  # 5% steps
    return (
        f"median {statistics.median(values):6.2f}  quartiles {cuts[4]:6.2f} .. {cuts[14]:6.2f}"
        f"  p10 .. p90 {cuts[1]:6.2f} .. {cuts[17]:6.2f}"
    )


async def one_size(base: str, size: int, pairs: int) -> None:
    dataset = build_dataset(size)
    extra = continuation(dataset, pairs * BATCH, "x")
    batches = [extra[i : i + BATCH] for i in range(0, len(extra), BATCH)]
    store: Any = await open_store(with_fresh_schema(base, f"append_{size}_{os.getpid()}"))
    for i in range(0, size, 1000):
        await store.append_many(dataset.entries[i : i + 1000])
    floor = await _connect(with_fresh_schema(base, f"append_floor_{size}_{os.getpid()}"))
    async with floor.cursor() as cur:
        for statement in _SCHEMA.split(";"):
            await cur.execute(statement)
        for i in range(0, size, 10_000):
            await cur.executemany(_INSERT, _rows(dataset.entries[i : i + 10_000]))
        await cur.execute("ANALYZE entries")
    await floor.commit()

    async def ours(batch: list[Any]) -> float:
        started = time.perf_counter_ns()
        await store.append_many(batch)
        return (time.perf_counter_ns() - started) / 1e6

    async def driver(batch: list[Any]) -> float:
        started = time.perf_counter_ns()
        async with floor.cursor() as cur:
            await cur.executemany(_INSERT, _rows(batch))
        await floor.commit()
        return (time.perf_counter_ns() - started) / 1e6

    # Warm both (statements prepared, caches filled) on batches that are not counted.
    warm = continuation(dataset, 5 * BATCH, "w", seed=12)
    for i in range(0, len(warm), BATCH):
        await driver(warm[i : i + BATCH])
    store_ms, floor_ms, ratios = [], [], []
    for n, batch in enumerate(batches):
        if n % 2:
            a = await ours(batch)
            b = await driver(batch)
        else:
            b = await driver(batch)
            a = await ours(batch)
        store_ms.append(a)
        floor_ms.append(b)
        ratios.append(a / b)
    met = sum(1 for r in ratios if r <= 2) / len(ratios)
    print(f"size {size:,}: {len(ratios)} pairs of append_many({BATCH}) / executemany({BATCH})")
    print(f"  ratio             {quantiles(ratios)}   pairs <= 2x: {met:.0%}")
    print(f"  append_many  ms   {quantiles(store_ms)}")
    print(f"  executemany  ms   {quantiles(floor_ms)}")
    print(f"  ratio of medians  {statistics.median(store_ms) / statistics.median(floor_ms):.2f}")
    await floor.close()
    await store.close()


async def main(base: str, sizes: list[int], pairs: int) -> None:
    for size in sizes:
        await one_size(base, size, pairs)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--pairs", type=int, default=200)
    cli = parser.parse_args()
    sizes = [int(s) for s in cli.sizes.split(",")]
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        asyncio.run(main(os.environ["PRISM_TEST_POSTGRES_URL"], sizes, cli.pairs))
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(base_url, sizes, cli.pairs))
