"""JSONL: the first write of a process to a store of many sessions, and its reopen.

Usage: python bench/adhoc/jsonl_first_write.py [--workdir DIR] [--sessions N] [--length N]

CPU time (``time.process_time``), best of 5, each in a fresh store object (as a new
process would see the directory). The store is built once, then one write by another
store object records ``.ids``; each sample then opens the store and appends the root of
a new session. Run it with ``PYTHONPATH=<old tree>`` for the figures of older code (which
loads every session on that write).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from prism_om.entries import message_entry
from prism_om.stores.jsonl import JsonlStore


async def build(directory: str, sessions: int, length: int) -> None:
    async with await JsonlStore.open(directory, fsync=False) as store:
        for s in range(sessions):
            sid = f"s{s}"
            chain, parent = [], None
            for i in range(length):
                entry = message_entry(sid, "user", f"turn {i} of {sid}", parent_id=parent)
                chain.append(entry)
                parent = entry.id
            await store.append_many(chain)
    async with await JsonlStore.open(directory, fsync=False) as store:
        await store.append(message_entry("warm", "user", "records the ids"))


async def first_write(directory: str, n: int) -> float:
    start = time.process_time()
    async with await JsonlStore.open(directory, fsync=False) as store:
        await store.append(message_entry(f"new{n}", "user", "hello"))
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--length", type=int, default=500)
    args = parser.parse_args()
    directory = args.workdir or tempfile.mkdtemp(prefix="jsonl-first-write-")
    if not os.path.exists(os.path.join(directory, ".sessions")):
        asyncio.run(build(directory, args.sessions, args.length))
    took = min(asyncio.run(first_write(directory, n)) for n in range(5))
    total = args.sessions * args.length
    print(
        f"{args.sessions} sessions x {args.length} entries ({total:,}): "
        f"first write {took * 1e3:.1f} ms CPU"
    )


if __name__ == "__main__":
    main()
