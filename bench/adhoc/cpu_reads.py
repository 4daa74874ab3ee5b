"""Issue 16 figures: CPU time of the SQLite reads, for before/after on a loaded machine.

Usage: PYTHONPATH=<checkout> python bench/adhoc/cpu_reads.py [--entries N] [--rounds R]

Wall-clock ratios swing with the load of other processes; the CPU time a call costs the
process (``time.process_time``: every thread, so the reader thread's work is counted)
moves much less. Run it once with PYTHONPATH at the old checkout and once at the new
one, and compare the lines. Builds the benchmark transcript (N entries, default 10,000)
in a SQLite store, then prints the median CPU time of R rounds (default 9) of:
``store.entries`` (the branch), the public page of 20, ``store.page_messages``, the
public recall by id; beside them a plain ``SELECT 1`` round trip on aiosqlite and
``SQLiteSession``'s read shape (``SELECT`` of one JSON column + ``json.loads``) over the
same messages in plain ``sqlite3``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable

import aiosqlite

from bench.data import SESSION_ID, build_dataset
from prism_om._gc import collector_paused
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import open_store


async def cpu(call: Callable[[], Awaitable[object]], rounds: int, per_round: int) -> float:
    """Median CPU seconds per call over ``rounds`` rounds of ``per_round`` calls."""
    samples = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(per_round):
            await call()
        samples.append((time.process_time() - start) / per_round)
    return statistics.median(samples)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    dataset = build_dataset(args.entries)
    work = tempfile.mkdtemp(prefix="cpu-reads-")
    store = await open_store(f"sqlite:{os.path.join(work, 'store.db')}")
    for i in range(0, args.entries, 1000):
        await store.append_many(dataset.entries[i : i + 1000])
    cursor = dataset.middle_message_id()
    memory_id, _ = dataset.middle_memory_id()
    plain = sqlite3.connect(os.path.join(work, "session.db"))
    plain.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, sid TEXT, message_data TEXT)")
    plain.executemany(
        "INSERT INTO m (sid, message_data) VALUES (?, ?)",
        [
            ("s", e.message.model_dump_json(by_alias=True) if e.message else json.dumps(e.data))
            for e in dataset.entries
        ],
    )
    plain.commit()
    rtt = await aiosqlite.connect(os.path.join(work, "rtt.db"))

    async def session_read() -> object:
        with collector_paused():
            rows = plain.execute("SELECT message_data FROM m WHERE sid = 's' ORDER BY id")
            return [json.loads(body) for (body,) in rows]

    reads: dict[str, tuple[Callable[[], Awaitable[object]], int]] = {
        "aiosqlite SELECT 1": (lambda: rtt.execute_fetchall("SELECT 1"), 200),
        "branch: store.entries": (lambda: store.entries(SESSION_ID), 1),
        "branch: SELECT + json.loads, one JSON column": (session_read, 1),
        "page of 20 (public)": (
            lambda: recall_observational_memory_branch_page(
                store, cursor, session_id=SESSION_ID, limit=20
            ),
            100,
        ),
        "store.page_messages(20)": (
            lambda: store.page_messages(SESSION_ID, cursor, 20, "forward"),
            100,
        ),
        "recall by id (public)": (
            lambda: recall_observational_memory(store, memory_id, session_id=SESSION_ID),
            100,
        ),
    }
    print(f"{args.entries:,} entries; CPU time per call, median of {args.rounds} rounds")
    for name, (call, per_round) in reads.items():
        value = await cpu(call, args.rounds, per_round)
        unit = f"{value * 1e6:8.1f} µs" if value < 1e-3 else f"{value * 1e3:8.2f} ms"
        print(f"  {name:45s} {unit}")
    await rtt.close()
    await store.close()
    plain.close()


if __name__ == "__main__":
    asyncio.run(main())
