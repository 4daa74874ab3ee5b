"""The public page of 20 of this tree beside an older one, same rows, interleaved
(SQLite, PostgreSQL): issue 16's page lever (page3).

    python bench/adhoc/page3_ab.py [--adapter sqlite|postgres] [--rev 4ae1ce9]
                                   [--sizes 10000,100000] [--rounds 9] [--calls 300]
                                   [--secrets N] [--busy]

The older tree (``git archive REV``) is imported as ``prism_om_old``, so both versions run
in one process, each with its own store open on the **same** file or schema. Each round
times one idle round trip (aiosqlite ``SELECT 1`` on SQLite, psycopg on PostgreSQL), then
the public ``recall_observational_memory_branch_page(store, cursor, session_id=...,
limit=20)`` (the bench's page, cursor in the middle) of each version in turn (the first
alternating between rounds): medians of ``--calls`` calls per round, wall
and this process's CPU time. Printed: medians over rounds, each version's ratio to the
round trip of its round, and new/old per round (median and quartiles). ``--secrets N``
passes N secrets (a new list each call) to every page. ``--busy`` keeps the second core
busy meanwhile (a child process spinning), the condition in which the aiosqlite round
trip is fastest. A script that prints numbers, not a test; the machine may be loaded by
others (compare ratios, and the CPU time).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
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

    def secrets() -> list[str] | None:
        # A new list per call, as an agent passes its secrets on every tool call.
        return [f"sk-live-{n:04d}-secret" for n in range(args.secrets)] if args.secrets else None

    if args.adapter == "sqlite":
        url = f"sqlite:{tempfile.mkdtemp(prefix='page3-ab-')}/ab.db"
    else:
        url = with_fresh_schema(base, f"page3_ab_{size}_{os.getpid()}")
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
        calls[f"page {name}"] = lambda s=store, om=om: om.recall_observational_memory_branch_page(
            s, cursor, session_id=SESSION_ID, limit=20, secrets=secrets()
        )
    if args.adapter == "sqlite":
        rtt_conn: Any = await importlib.import_module("aiosqlite").connect(url[len("sqlite:") :])

        async def select_one() -> object:
            return await rtt_conn.execute_fetchall("SELECT 1")

    else:
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
    cpu_ratio: dict[str, list[float]] = {}
    for turn in range(args.rounds):
        rtt, rtt_cpu = await medians(select_one, args.calls)
        wall.setdefault("rtt", []).append(rtt)
        cpu.setdefault("rtt", []).append(rtt_cpu)
        order = ["old", "new"] if turn % 2 == 0 else ["new", "old"]
        took = {}
        for name in order:
            key = f"page {name}"
            took[name], used = await medians(calls[key], args.calls)
            wall.setdefault(key, []).append(took[name])
            cpu.setdefault(key, []).append(used)
            ratio.setdefault(f"{key} /rtt", []).append(took[name] / rtt)
        ratio.setdefault("page new/old", []).append(took["new"] / took["old"])
        cpu_ratio.setdefault("page cpu new/old", []).append(
            cpu["page new"][-1] / cpu["page old"][-1]
        )
    head = f"{args.adapter} size {size:,}, {args.secrets} secrets, busy core: {args.busy}"
    head += f": {args.rounds} rounds x {args.calls} calls"
    print(f"{head} (old = {args.rev})")
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
    for key, values in [*ratio.items(), *cpu_ratio.items()]:
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


def run(base: str, args: Any) -> None:
    """``main``, with the second core kept busy by a spinning child when ``--busy``."""
    spinner = None
    if args.busy:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        asyncio.run(main(base, args))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--adapter", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--rev", default="4ae1ce9")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--secrets", type=int, default=0, help="secrets passed per call")
    parser.add_argument("--busy", action="store_true", help="keep the second core busy")
    cli = parser.parse_args()
    cli.sizes = [int(s) for s in cli.sizes.split(",")]
    if cli.adapter == "sqlite":
        run("", cli)
    elif os.environ.get("PRISM_TEST_POSTGRES_URL"):
        run(os.environ["PRISM_TEST_POSTGRES_URL"], cli)
    else:
        with throwaway_cluster() as base_url:
            run(base_url, cli)
