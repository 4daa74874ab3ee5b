"""SQLite append_many of 100,000 messages against its floor, median of 3.

Usage: python bench/adhoc/append_figures.py
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import tempfile
import time

from prism_om.entries import SessionEntry
from prism_om.stores import open_store
from prism_om.testing.generate import make_message
from prism_om.tokens import TokenEstimator, get_estimator

N = 100_000
ROUNDS = 3


def messages(n: int) -> list[SessionEntry]:
    """A linear chain of ``n`` user messages in session ``s``."""
    entries: list[SessionEntry] = []
    parent = None
    for i in range(n):
        text = f"message {i} about the deploy budget {i % 97} and friday"
        e = make_message("s", f"s-{i}", parent, "user", text, i)
        entries.append(e)
        parent = e.id
    return entries


def floor_seconds(entries: list[SessionEntry], est: TokenEstimator, path: str) -> float:
    """Seconds to encode, serialise and ``executemany`` the entries into a plain WAL table."""
    t = time.perf_counter()
    rows = [
        (e.id, e.session_id, e.parent_id, e.model_dump_json(by_alias=True), est.count_entry(e))
        for e in entries
    ]
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("PRAGMA synchronous=NORMAL")
    c.execute("CREATE TABLE t (id TEXT PRIMARY KEY, s TEXT, p TEXT, body TEXT, tokens INT)")
    c.executemany("INSERT INTO t VALUES (?,?,?,?,?)", rows)
    c.commit()
    elapsed = time.perf_counter() - t
    c.close()
    return elapsed


async def sqlite_append_seconds(entries: list[SessionEntry], path: str) -> float:
    """Seconds for one ``append_many`` of the entries into a fresh SQLite store."""
    store = await open_store(f"sqlite:{path}")
    t = time.perf_counter()
    await store.append_many(entries)
    elapsed = time.perf_counter() - t
    await store.close()
    return elapsed


async def main() -> None:
    """Print the median floor and SQLite append_many times over three rounds."""
    est = get_estimator()
    entries = messages(N)
    ours: list[float] = []
    floors: list[float] = []
    for _ in range(ROUNDS):
        d = tempfile.mkdtemp()
        floors.append(floor_seconds(entries, est, f"{d}/f.db"))
        ours.append(await sqlite_append_seconds(entries, f"{d}/s.db"))
    f = statistics.median(floors)
    o = statistics.median(ours)
    print(
        f"floor {f:.2f}s ({N / f:,.0f}/s); "
        f"sqlite append_many {o:.2f}s ({N / o:,.0f}/s) = {o / f:.2f}x"
    )


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    asyncio.run(main())
