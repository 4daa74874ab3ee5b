"""A subprocess for the SQLite crash and multi-process tests (not collected by pytest).

Usage::

    python crash_worker_sqlite.py crash  DB SESSION SEED   # batches forever, until killed
    python crash_worker_sqlite.py append DB SESSION COUNT  # COUNT single appends, then exit

``crash`` appends batches of 1..50 entries with ``append_many`` and prints ``K N`` (batch
number, batch size) only after ``append_many`` returned, so every printed batch is
committed. Entry ids are ``SESSION.bK.nN.iI``, so a reader can tell whether a batch is
whole from the ids alone.
"""

from __future__ import annotations

import asyncio
import random
import sys

from prism_om.entries import message_entry
from prism_om.stores.sqlite import SqliteStore


def batch_id(session: str, batch: int, size: int, index: int) -> str:
    return f"{session}.b{batch}.n{size}.i{index}"


async def crash_loop(path: str, session: str, seed: int) -> None:
    rng = random.Random(seed)
    store = await SqliteStore.open(path)
    try:
        parent: str | None = None
        batch = 0
        while True:
            size = rng.randint(1, 50)
            entries = []
            for index in range(size):
                entry_id = batch_id(session, batch, size, index)
                text = f"batch {batch} entry {index} " + "x" * rng.randint(0, 400)
                entries.append(
                    message_entry(session, "user", text, parent_id=parent, entry_id=entry_id)
                )
                parent = entry_id
            await store.append_many(entries)
            print(batch, size, flush=True)
            batch += 1
    finally:
        await store.close()


async def append_singles(path: str, session: str, count: int) -> None:
    async with await SqliteStore.open(path) as store:
        parent: str | None = None
        for index in range(count):
            entry_id = f"{session}.{index}"
            await store.append(
                message_entry(session, "user", f"m{index}", parent_id=parent, entry_id=entry_id)
            )
            parent = entry_id
    print("done", flush=True)


def main(argv: list[str]) -> None:
    mode, path, session, number = argv
    if mode == "crash":
        asyncio.run(crash_loop(path, session, int(number)))
    elif mode == "append":
        asyncio.run(append_singles(path, session, int(number)))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
