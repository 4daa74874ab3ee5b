"""Figures for issue 13 items 4, 17 and 20 on a large SQLite store: what ``PRAGMA
quick_check`` costs (why the open path never runs it), ``sessions`` from the summary table
against reading every entry, and the version-1 migration's backfill.

    python bench/adhoc/sqlite_integrity_figures.py                  # 1,000,000 entries
    python bench/adhoc/sqlite_integrity_figures.py --entries 100000 --keep /tmp/s.db

Prints numbers; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from prism_om.cli.reading import session_rows
from prism_om.entries import message_entry
from prism_om.stores._summary import summarize_entries
from prism_om.stores.sqlite import SqliteStore

BATCH = 5000


async def build(path: Path, entries: int, sessions: int) -> None:
    per = entries // sessions
    async with await SqliteStore.open(path) as store:
        for s in range(sessions):
            sid = f"s{s:03d}"
            parent = None
            for start in range(0, per, BATCH):
                batch = []
                for n in range(start, min(start + BATCH, per)):
                    entry = message_entry(
                        sid,
                        "user" if n % 2 else "assistant",
                        f"message {n} of {sid}: some words to make a realistic row",
                        parent_id=parent,
                        entry_id=f"{sid}.{n}",
                        timestamp=f"2026-03-{1 + s % 28:02d}T10:{n // 60 % 60:02d}:{n % 60:02d}Z",
                    )
                    batch.append(entry)
                    parent = entry.id
                await store.append_many(batch)
            print(f"  built {sid} ({per} entries)", file=sys.stderr)


def timed(label: str, action) -> object:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    result = action()
    print(f"{label}: {time.perf_counter() - start:.2f} s")
    return result


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--keep", metavar="FILE", help="build here (reused if it exists)")
    args = parser.parse_args()
    where = Path(args.keep) if args.keep else Path(tempfile.mkdtemp()) / "figures.db"
    if not where.exists():
        start = time.perf_counter()
        await build(where, args.entries, args.sessions)
        print(f"build {args.entries} entries: {time.perf_counter() - start:.1f} s")
    print(f"file: {where} ({size_mb(where):.0f} MB)")

    conn = sqlite3.connect(where)
    # Cold-ish and warm: the first run reads the file from disk or page cache.
    for run in (1, 2):
        rows = timed(
            f"PRAGMA quick_check (run {run})", lambda: conn.execute("PRAGMA quick_check").fetchall()
        )
    print(f"  quick_check said {rows}")
    conn.close()

    async with await SqliteStore.open(where, read_only=True) as store:
        start = time.perf_counter()
        rows = await session_rows(store)
        took = time.perf_counter() - start
        print(f"sessions from the summary table: {took:.3f} s ({len(rows)} sessions)")
        start = time.perf_counter()
        slow = [
            summarize_entries(sid, await store.list(sid), len(await store.leaves(sid)))
            for sid in await store.sessions()
        ]
        print(f"sessions from every entry (the old way): {time.perf_counter() - start:.2f} s")
        assert [r["entries"] for r in rows] == [s.entries for s in slow]

    # The version-1 migration: drop the table, mark the file version 1, reopen.
    conn = sqlite3.connect(where)
    conn.execute("DROP TABLE session_summary")
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    start = time.perf_counter()
    async with await SqliteStore.open(where) as store:
        print(f"open with the v1 -> v2 migration: {time.perf_counter() - start:.2f} s")
        assert len(await store.session_summaries()) == args.sessions
    if not args.keep:
        remove(where)


def size_mb(path: Path) -> float:
    return os.path.getsize(path) / 1e6


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


if __name__ == "__main__":
    asyncio.run(main())
