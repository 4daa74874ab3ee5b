"""The SQLite page of 20 of this tree beside an older one, public and raw, interleaved:
issue 16's page lever (page4: the loop's page in plain calls, its arguments checked once).

    python bench/adhoc/page4_ab.py [--rev eca7998] [--sizes 10000,100000]
                                   [--rounds 9] [--calls 300] [--busy]

The older tree is imported as ``prism_om_old`` (``page3_ab.old_tree``), so both versions
run in one process, each with its own store open on the **same** file. Each round times
one idle aiosqlite round trip (``SELECT 1``), then, in an order that alternates between
rounds, the public ``recall_observational_memory_branch_page(store, cursor,
session_id=..., limit=20)`` (the bench's page, cursor in the middle) and the raw
``store.page_messages(session, cursor, 20)`` of each version: medians of ``--calls``
calls per round, wall and this process's CPU time. Printed: medians over rounds (CPU
too), each one's ratio to the round trip of its round, and new/old per round (median and
quartiles, wall and CPU). ``--busy`` keeps the second core busy meanwhile (a child
process spinning), the condition in which the round trip is fastest. A script that
prints numbers, not a test; the machine may be loaded by others (compare the ratios and
the CPU time).
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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from bench.adhoc._ab import Call, medians, old_tree
from bench.data import SESSION_ID, build_dataset


async def one_size(size: int, args: Any) -> None:
    dataset = build_dataset(size)
    cursor = dataset.middle_message_id()
    url = f"sqlite:{tempfile.mkdtemp(prefix='page4-ab-')}/ab.db"
    builder = await importlib.import_module("prism_om.stores").open_store(url)
    for i in range(0, size, 1000):
        await builder.append_many(dataset.entries[i : i + 1000])
    await builder.close()
    stores: list[Any] = []
    calls: dict[str, Call] = {}
    for name, package in (("old", "prism_om_old"), ("new", "prism_om")):
        store = await importlib.import_module(f"{package}.stores").open_store(url)
        om = importlib.import_module(f"{package}.observational_memory")
        stores.append(store)
        calls[f"page {name}"] = lambda s=store, om=om: om.recall_observational_memory_branch_page(
            s, cursor, session_id=SESSION_ID, limit=20
        )
        calls[f"raw {name}"] = lambda s=store: s.page_messages(SESSION_ID, cursor, 20, "forward")
    rtt_conn: Any = await importlib.import_module("aiosqlite").connect(url[len("sqlite:") :])

    async def select_one() -> object:
        return await rtt_conn.execute_fetchall("SELECT 1")

    for call in calls.values():
        for _ in range(50):
            await call()
    wall: dict[str, list[float]] = {}
    cpu: dict[str, list[float]] = {}
    per_rtt: dict[str, list[float]] = {}
    for turn in range(args.rounds):
        rtt, rtt_cpu = await medians(select_one, args.calls)
        wall.setdefault("rtt", []).append(rtt)
        cpu.setdefault("rtt", []).append(rtt_cpu)
        names = list(calls) if turn % 2 == 0 else list(reversed(calls))
        for key in names:
            took, used = await medians(calls[key], args.calls)
            wall.setdefault(key, []).append(took)
            cpu.setdefault(key, []).append(used)
            per_rtt.setdefault(key, []).append(took / rtt)
    print(
        f"sqlite size {size:,}, busy core: {args.busy}: {args.rounds} rounds x {args.calls}"
        f" calls (old = {args.rev})"
    )
    for key in wall:
        line = (
            f"  {key:<9} wall {statistics.median(wall[key]):7.1f} µs"
            f" [{min(wall[key]):6.1f} .. {max(wall[key]):6.1f}]"
            f"  cpu {statistics.median(cpu[key]):6.1f} µs"
        )
        if key in per_rtt:
            line += f"  {statistics.median(per_rtt[key]):5.2f}x rtt"
        print(line)
    for what in ("page", "raw"):
        for label, table in (("wall", wall), ("cpu", cpu)):
            ratios = [
                n / o for n, o in zip(table[f"{what} new"], table[f"{what} old"], strict=True)
            ]
            q1, _, q3 = statistics.quantiles(ratios, n=4)
            print(
                f"  {what} {label} new/old {statistics.median(ratios):.3f}"
                f" (quartiles {q1:.3f} .. {q3:.3f})"
            )
    await rtt_conn.close()
    for store in stores:
        await store.close()


async def main(args: Any) -> None:
    sys.path.insert(0, old_tree(args.rev))
    for size in args.sizes:
        await one_size(size, args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--rev", default="eca7998")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--busy", action="store_true", help="keep the second core busy")
    cli = parser.parse_args()
    cli.sizes = [int(s) for s in cli.sizes.split(",")]
    spinner = None
    if cli.busy:
        spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        asyncio.run(main(cli))
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
