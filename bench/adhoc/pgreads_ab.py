"""PostgreSQL recall and page of this tree beside an older one, on the same rows, interleaved.

    python bench/adhoc/pgreads_ab.py [--rev 0629349] [--sizes 10000,100000] [--rounds 9]
                                     [--calls 200] [--schema-prefix NAME]

The older tree (``git archive REV``) is imported as ``prism_om_old``, so both versions run
in one process on one server, each with its own store (pool, kept read connection,
prepared statements) open on the **same** schema: the same rows, the same server caches.
Each round times, for each version in turn (the first alternating between rounds), the
public recall by id and the public page of 20 right after one ``SELECT 1`` round trip
(psycopg ``execute`` + ``fetchall`` on an open connection, as ``bench/pg.py``): medians
of ``--calls`` calls per round, wall and this process's CPU time (the server's work
shows in wall time only). Printed: medians over rounds, each version's ratio to the
round trip of its round, and new/old per round (median and quartiles).

With ``--schema-prefix`` an existing schema ``{prefix}{size}`` holding the bench
transcript is used instead of building one (``PRISM_TEST_POSTGRES_URL`` names the
server). A script that prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import sys
from typing import Any

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, ROOT)

from bench.adhoc._ab import Call, medians, old_tree  # noqa: E402
from bench.data import SESSION_ID, build_dataset  # noqa: E402
from prism_om.testing.postgres_cluster import (  # noqa: E402
    throwaway_cluster,
    with_fresh_schema,
)


async def one_size(base: str, size: int, args: Any) -> None:
    dataset = build_dataset(size)
    cursor = dataset.middle_message_id()
    memory_id, _ = dataset.middle_memory_id()
    if args.schema_prefix:
        url = with_fresh_schema(base, f"{args.schema_prefix}{size}")
    else:
        url = with_fresh_schema(base, f"pgreads_ab_{size}_{os.getpid()}")
        builder = await importlib.import_module("prism_om.stores").open_store(url)
        for i in range(0, size, 1000):
            await builder.append_many(dataset.entries[i : i + 1000])
        await builder.close()
    stores: dict[str, Any] = {}
    calls: dict[str, Call] = {}
    for name, package in (("old", "prism_om_old"), ("new", "prism_om")):
        store = await importlib.import_module(f"{package}.stores").open_store(url)
        om = importlib.import_module(f"{package}.observational_memory")
        stores[name] = store
        calls[f"recall {name}"] = lambda s=store, om=om: om.recall_observational_memory(
            s, memory_id, session_id=SESSION_ID
        )
        calls[f"page20 {name}"] = lambda s=store, om=om: om.recall_observational_memory_branch_page(
            s, cursor, session_id=SESSION_ID, limit=20
        )
    rtt_conn = await importlib.import_module("psycopg").AsyncConnection.connect(
        stores["new"]._pool.conninfo, autocommit=True
    )

    async def select_one() -> object:
        return await (await rtt_conn.execute("SELECT 1")).fetchall()

    for call in calls.values():
        for _ in range(20):  # psycopg prepares at the 6th run; the server plans 5 more
            await call()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    ratio: dict[str, list[float]] = {}
    for turn in range(args.rounds):
        rtt, rtt_cpu = await medians(select_one, args.calls)
        wall.setdefault("rtt", []).append(rtt)
        cpu.setdefault("rtt", []).append(rtt_cpu)
        for workload in ("recall", "page20"):
            order = ["old", "new"] if turn % 2 == 0 else ["new", "old"]
            took = {}
            for name in order:
                key = f"{workload} {name}"
                took[name], used = await medians(calls[key], args.calls)
                wall.setdefault(key, []).append(took[name])
                cpu.setdefault(key, []).append(used)
                ratio.setdefault(f"{key} /rtt", []).append(took[name] / rtt)
            ratio.setdefault(f"{workload} new/old", []).append(took["new"] / took["old"])
    print(f"size {size:,}: {args.rounds} rounds x {args.calls} calls (old = {args.rev})")
    for key in wall:
        print(
            f"  {key:<14} wall {statistics.median(wall[key]):8.1f} µs"
            f" [{min(wall[key]):7.1f} .. {max(wall[key]):7.1f}]"
            f"  cpu {statistics.median(cpu[key]):7.1f} µs"
            + (
                f"  {statistics.median(ratio[key + ' /rtt']):5.2f}x rtt"
                if key + " /rtt" in ratio
                else ""
            )
        )
    for key, values in ratio.items():
        if key.endswith("new/old"):
            q1, _, q3 = statistics.quantiles(values, n=4)
            print(f"  {key:<16} {statistics.median(values):.3f} (quartiles {q1:.3f} .. {q3:.3f})")
    await rtt_conn.close()
    for store in stores.values():
        await store.close()


async def main(base: str, args: Any) -> None:
    sys.path.insert(0, old_tree(args.rev))
    for size in args.sizes:
        await one_size(base, size, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", default="0629349")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--schema-prefix", default="")
    cli = parser.parse_args()
    cli.sizes = [int(s) for s in cli.sizes.split(",")]
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        asyncio.run(main(os.environ["PRISM_TEST_POSTGRES_URL"], cli))
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(base_url, cli))
