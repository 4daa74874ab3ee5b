"""Memory and JSONL: page of 20 and recall at 10k and 100k, and a JSONL reopen breakdown.

Usage: python bench/adhoc/memory_jsonl_figures.py [--workdir DIR] [--calls N]

CPU time (``time.process_time``, every thread of the process), not wall time: on a shared
2-core machine wall-clock medians move several-fold between runs, CPU time far less. Page
and recall are medians of 7 samples of ``--calls`` calls, both sizes in one process; the
reopen rows are the best of 5, on the 100k session, each against the same floor (read the
file + ``json.loads`` of each line). Run it with ``PYTHONPATH=<old tree>`` (and ``--calls
2``) for the figures of older code.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.data import SESSION_ID, build_dataset
from prism_om.entries import entry_from_wire
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore, open_store
from prism_om.stores._tree import TreeIndex

SIZES = (10_000, 100_000)


async def cpu_median(fn: Callable[[], Awaitable[object]], calls: int) -> float:
    await fn()
    gc.collect()
    samples = []
    for _ in range(7):
        start = time.process_time()
        for _ in range(calls):
            await fn()
        samples.append((time.process_time() - start) / calls)
    return sorted(samples)[3]


async def measure(
    store: SessionStore, cursor: str, memory_id: str, calls: int
) -> tuple[float, float]:
    async def page() -> object:
        return await recall_observational_memory_branch_page(
            store, cursor, session_id=SESSION_ID, limit=20
        )

    async def recall() -> object:
        return await recall_observational_memory(store, memory_id, session_id=SESSION_ID)

    return await cpu_median(page, calls), await cpu_median(recall, calls)


async def page_and_recall(workdir: str, calls: int) -> None:
    for size in SIZES:
        dataset = build_dataset(size)
        cursor = dataset.middle_message_id()
        memory_id, _ = dataset.middle_memory_id()
        for url in ("memory:", f"jsonl:{os.path.join(workdir, f'jsonl-{size}')}"):
            store = await open_store(url)
            if url == "memory:" or not await store.leaf(SESSION_ID):
                for i in range(0, size, 1000):
                    await store.append_many(dataset.entries[i : i + 1000])
            await store.entry_count(SESSION_ID)  # a JSONL session is loaded before timing

            p, r = await measure(store, cursor, memory_id, calls)
            print(
                f"{url.split(':')[0]:6s} {size:>7,}: page of 20 {p * 1e6:9.1f} µs, "
                f"recall {r * 1e6:9.1f} µs"
            )
            await store.close()


def reopen_breakdown(directory: str) -> None:
    path = os.path.join(directory, SESSION_ID + ".jsonl")

    def read() -> bytes:
        with open(path, "rb") as f:
            return f.read()

    def floor() -> Any:
        return [json.loads(line) for line in read().splitlines()]

    def validate() -> Any:
        return [entry_from_wire(line) for line in read().splitlines()]

    def validate_index() -> Any:
        index = TreeIndex("figures")
        for line in read().splitlines():
            entry = entry_from_wire(line)
            index.check([entry])
            index.apply([entry])
        return index

    async def reopen_async() -> None:
        store = await open_store(f"jsonl:{directory}")
        await store.leaf(SESSION_ID)
        await store.recent_messages(SESSION_ID, 20)
        await store.close()

    def reopen() -> None:
        asyncio.run(reopen_async())

    def best(fn: Callable[[], Any], collector: bool) -> float:
        times = []
        for _ in range(5):
            gc.collect()
            if not collector:
                gc.disable()
            start = time.process_time()
            fn()
            times.append(time.process_time() - start)
            gc.enable()
        return min(times)

    rows = [
        ("read + json.loads (the floor)", floor, True),
        ("  the same, collector paused", floor, False),
        ("read + entry_from_wire, collector paused", validate, False),
        ("read + entry_from_wire + index, paused", validate_index, False),
        ("store: open + leaf + recent 20", reopen, True),
        ("  the same, collector off throughout", reopen, False),
    ]
    base = None
    for name, fn, collector in rows:
        took = best(fn, collector)
        base = base or took
        print(f"{name:42s} {took * 1e3:7.0f} ms  {took / base:.2f}x the floor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None, help="keeps the JSONL stores (default: tmp)")
    parser.add_argument("--calls", type=int, default=200, help="calls per sample")
    args = parser.parse_args()
    workdir = args.workdir or tempfile.mkdtemp(prefix="memory-jsonl-figures-")
    asyncio.run(page_and_recall(workdir, args.calls))
    reopen_breakdown(os.path.join(workdir, f"jsonl-{SIZES[-1]}"))


if __name__ == "__main__":
    main()
