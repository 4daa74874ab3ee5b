"""Appends at equal durability: each system's ``synchronous`` setting, and ours at both.

``python -m bench`` times our SQLite store at its default ``synchronous=NORMAL`` (WAL: a
commit is not fsynced, so it survives an application crash but not a power loss), and the
peers at theirs. SQLiteSession and AsyncSqliteSaver leave SQLite's default, FULL, in WAL
mode: every commit fsyncs the WAL. This prints what each connection reports, then times
append one and append 100 for every system, ours at NORMAL and at FULL, interleaved call
by call so that the machine's load falls on all alike.

Usage: python bench/adhoc/durability_figures.py [--entries 10000] [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

from bench.data import SESSION_ID, build_dataset, continuation
from bench.peers import _item
from prism_om.entries import SessionEntry
from prism_om.stores.sqlite import SqliteStore

Call = Callable[[list[SessionEntry]], Awaitable[object]]


async def ours(path: str, synchronous: str, entries: list[SessionEntry]) -> tuple[Any, Call]:
    store = await SqliteStore.open(path, synchronous=synchronous)
    for i in range(0, len(entries), 1000):
        await store.append_many(entries[i : i + 1000])
    level = (await store.connection_settings())["synchronous"]
    return (store, level), store.append_many


async def sqlite_session(path: str, entries: list[SessionEntry]) -> tuple[Any, Call]:
    from agents import SQLiteSession

    session = SQLiteSession(SESSION_ID, path)
    items = [_item(e) for e in entries if e.kind == "message"]
    for i in range(0, len(items), 1000):
        await session.add_items(items[i : i + 1000])
    level = session._get_connection().execute("PRAGMA synchronous").fetchone()[0]

    async def add(batch: list[SessionEntry]) -> None:
        await session.add_items([_item(e) for e in batch])

    return (session, level), add


async def async_sqlite_saver(path: str, first: int) -> tuple[Any, Call]:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    manager = AsyncSqliteSaver.from_conn_string(path)
    saver = await manager.__aenter__()
    await saver.setup()
    level = (await saver.conn.execute_fetchall("PRAGMA synchronous"))[0][0]
    counter = [first]

    async def put(batch: list[SessionEntry]) -> None:
        # One checkpoint per message: a batch is as many aput calls.
        for entry in batch:
            n = counter[0]
            counter[0] += 1
            cp: Any = empty_checkpoint()
            cp["id"] = f"{n:032x}"
            cp["channel_values"] = {"messages": [_item(entry)]}
            config: Any = {"configurable": {"thread_id": SESSION_ID, "checkpoint_ns": ""}}
            await saver.aput(config, cp, {"source": "loop", "step": n}, {})

    return (manager, level), put


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    data = build_dataset(args.entries)
    # One chain, taken in the order the calls append it: a single, and every fourth
    # round a batch of 100 right after it.
    extra = continuation(data, args.calls + (args.calls + 3) // 4 * 100, "x")
    workdir = tempfile.mkdtemp(prefix="durability-")
    systems: dict[str, tuple[Any, Call]] = {
        "prism-om sqlite NORMAL (default)": await ours(
            os.path.join(workdir, "normal.db"), "NORMAL", data.entries
        ),
        "prism-om sqlite FULL": await ours(os.path.join(workdir, "full.db"), "FULL", data.entries),
        "SQLiteSession (its default)": await sqlite_session(
            os.path.join(workdir, "agents.db"), data.entries
        ),
        "AsyncSqliteSaver (its default)": await async_sqlite_saver(
            os.path.join(workdir, "langgraph.db"), args.entries
        ),
    }
    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
    print("synchronous as each connection reports it (all in WAL mode):")
    for name, ((_, level), _) in systems.items():
        print(f"  {name}: {names.get(level, level)}")
    singles = {name: [] for name in systems}
    batches = {name: [] for name in systems if "AsyncSqliteSaver" not in name}
    # Every system appends the same entries to its own file, one call each in turn.
    at = 0
    for n in range(args.calls):
        single, batch = [extra[at]], extra[at + 1 : at + 101]
        at += 1
        for name, (_, call) in systems.items():
            start = time.perf_counter()
            await call(single)
            singles[name].append(time.perf_counter() - start)
        if n % 4 == 0:
            at += 100
            for name in batches:
                start = time.perf_counter()
                await systems[name][1](batch)
                batches[name].append(time.perf_counter() - start)
    result = {
        "append one (median)": {k: statistics.median(v) for k, v in singles.items()},
        "append_many of 100 (median)": {k: statistics.median(v) for k, v in batches.items()},
    }
    for workload, figures in result.items():
        print(workload)
        for name, seconds in figures.items():
            print(f"  {name:34s} {seconds * 1e6:10.0f} us")
    print(json.dumps({w: {k: round(v * 1e6) for k, v in f.items()} for w, f in result.items()}))
    for name, ((handle, _), _) in systems.items():
        if isinstance(handle, SqliteStore):
            await handle.close()
        elif "SQLiteSession" in name:
            handle.close()
        else:
            await handle.__aexit__(None, None, None)


if __name__ == "__main__":
    asyncio.run(main())
