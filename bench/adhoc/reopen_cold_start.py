"""A/B of the SQLite cold start (open + leaf + recent_messages(20)), old code beside new.

``python bench/adhoc/reopen_cold_start.py --old REV`` copies ``prism_om`` as it was at REV
into a temporary directory as the package ``prism_om_old`` (its imports are relative), builds
one store per size with the current code, then times, alternating call by call in one
process: the old code's cold start, the new code's, the floor of ``bench/floor.py``
(connect + the last 20 rows + ``json.loads``, on the same file) and, when installed,
openai-agents' ``SQLiteSession`` (construct + ``get_items(limit=20)``) and LangGraph's
``AsyncSqliteSaver`` (connect + ``aget_tuple`` of the latest) on files of the same
messages. The close after each open is not timed, as in ``python -m bench``. Prints medians
of wall and CPU time (``time.process_time``: every thread of the process) in µs, and the
ratios. The machine is shared: compare the ratios, not the absolute figures.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.data import SESSION_ID, build_dataset, continuation
from bench.peers import _item, run_async_sqlite_saver
from bench.timing import Timer
from bench.workloads import AppendSample
from prism_om.stores.sqlite import SqliteStore

Opener = Callable[[], Awaitable[Callable[[], Awaitable[None]]]]


def old_package(rev: str, into: str) -> Any:
    """``prism_om`` at ``rev``, importable as ``prism_om_old``."""
    archive = os.path.join(into, "old.tar")
    subprocess.run(["git", "archive", "-o", archive, rev, "prism_om", "schema.sql"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    os.rename(os.path.join(into, "prism_om"), os.path.join(into, "prism_om_old"))
    sys.path.insert(0, into)
    return importlib.import_module("prism_om_old.stores.sqlite").SqliteStore


def store_opener(cls: Any, path: str) -> Opener:
    async def run() -> Callable[[], Awaitable[None]]:
        store = await cls.open(path)
        await store.leaf(SESSION_ID)
        await store.recent_messages(SESSION_ID, 20)
        return store.close  # type: ignore[no-any-return]

    return run


def floor_opener(path: str) -> Opener:
    async def run() -> Callable[[], Awaitable[None]]:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")
        rows = conn.execute(
            "SELECT id, session_id, parent_id, kind, timestamp, body FROM entries "
            "WHERE session_id = ? ORDER BY seq DESC LIMIT 20",
            (SESSION_ID,),
        ).fetchall()
        [(*row[:5], json.loads(row[5])) for row in rows]

        async def close() -> None:
            conn.close()

        return close

    return run


async def session_opener(path: str, messages: list[Any]) -> Opener | None:
    try:
        from agents import SQLiteSession
    except ImportError:
        return None
    session = SQLiteSession(SESSION_ID, path)
    items = [_item(m) for m in messages]
    for i in range(0, len(items), 1000):
        await session.add_items(items[i : i + 1000])
    session.close()

    async def run() -> Callable[[], Awaitable[None]]:
        fresh = SQLiteSession(SESSION_ID, path)
        await fresh.get_items(limit=20)

        async def close() -> None:
            fresh.close()

        return close

    return run


async def saver_opener(data: Any, workdir: str) -> Opener | None:
    """LangGraph's ``AsyncSqliteSaver`` on the file ``python -m bench`` builds for it."""
    try:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    except ImportError:
        return None
    quick = Timer(repeat=1, min_sample_s=0.0, budget_s=1.0)
    await run_async_sqlite_saver(
        data, AppendSample([], continuation(data, 3, "lg")), workdir, quick
    )
    path = os.path.join(workdir, f"langgraph-{data.size}.db")
    thread: Any = {"configurable": {"thread_id": SESSION_ID, "checkpoint_ns": ""}}

    async def run() -> Callable[[], Awaitable[None]]:
        manager = AsyncSqliteSaver.from_conn_string(path)
        saver = await manager.__aenter__()
        await saver.aget_tuple(thread)

        async def close() -> None:
            await manager.__aexit__(None, None, None)

        return close

    return run


async def one_size(size: int, old_cls: Any, workdir: str, samples: int, peers: bool) -> None:
    data = build_dataset(size)
    path = os.path.join(workdir, f"s-{size}.db")
    async with await SqliteStore.open(path) as store:
        for i in range(0, len(data.entries), 1000):
            await store.append_many(data.entries[i : i + 1000])
    openers: dict[str, Opener] = {
        "old": store_opener(old_cls, path),
        "new": store_opener(SqliteStore, path),
        "floor": floor_opener(path),
    }
    peer = (
        None
        if not peers
        else await session_opener(os.path.join(workdir, f"agents-{size}.db"), data.messages)
    )
    if peer is not None:
        openers["SQLiteSession"] = peer
    saver = None if not peers else await saver_opener(data, workdir)
    if saver is not None:
        openers["AsyncSqliteSaver"] = saver
    wall: dict[str, list[float]] = {name: [] for name in openers}
    cpu: dict[str, list[float]] = {name: [] for name in openers}
    for attempt in range(samples + 5):
        for name, run in openers.items():
            w, c = time.perf_counter(), time.process_time()
            close = await run()
            w, c = time.perf_counter() - w, time.process_time() - c
            await close()
            if attempt >= 5:  # warm-up: the page cache, imports, the first connect
                wall[name].append(w)
                cpu[name].append(c)
    med = {name: statistics.median(v) * 1e6 for name, v in wall.items()}
    cpu_med = {name: statistics.median(v) * 1e6 for name, v in cpu.items()}
    print(f"\n{size:,} entries, {samples} samples each, medians (µs):")
    for name in openers:
        print(
            f"  {name:14} wall {med[name]:7.0f}  cpu {cpu_med[name]:7.0f}  "
            f"= {med[name] / med['floor']:.2f}x floor (cpu {cpu_med[name] / cpu_med['floor']:.2f}x)"
        )
    print(
        f"  new / old: wall {med['new'] / med['old']:.2f}, "
        f"cpu {cpu_med['new'] / cpu_med['old']:.2f}"
    )
    for other in ("SQLiteSession", "AsyncSqliteSaver"):
        if other in med:
            print(f"  new / {other}: wall {med['new'] / med[other]:.2f}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="git revision of the old code")
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--no-peers", action="store_true", help="old, new and floor only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        old_cls = old_package(args.old, workdir)
        for size in (int(s) for s in args.sizes.split(",")):
            await one_size(size, old_cls, workdir, args.samples, not args.no_peers)


if __name__ == "__main__":
    asyncio.run(main())
