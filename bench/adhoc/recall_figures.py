"""Recall by id and a page of 20 on an existing SQLite store, beside plain round trips.

Usage: python bench/adhoc/recall_figures.py FILE

Recall by id and a page of 20 on an existing SQLite store (for example the 1,000,000-entry
file that ``python -m bench --large --adapters sqlite`` builds), beside one aiosqlite round
trip and a plain ``sqlite3`` primary-key lookup.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import time

import aiosqlite

from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore, open_store

SAMPLES = 50
PAGE_LIMIT = 20


def median_us(times: list[float]) -> float:
    """Median of ``times`` (seconds) in microseconds."""
    return statistics.median(times) * 1e6


def sample_ids(c: sqlite3.Connection) -> tuple[list[str], list[str]]:
    """Up to 50 random observation ids (from the fold table) and 50 random message ids."""
    ids = [
        r[0] for r in c.execute("SELECT memory_id FROM om_observations ORDER BY random() LIMIT 50")
    ]
    msgs = [
        r[0]
        for r in c.execute("SELECT id FROM entries WHERE kind='message' ORDER BY random() LIMIT 50")
    ]
    return ids, msgs


async def time_recall(s: SessionStore, sid: str, ids: list[str]) -> float:
    """Median microseconds to recall each observation id."""
    ts: list[float] = []
    for i in ids:
        t = time.perf_counter()
        r = await recall_observational_memory(s, i, session_id=sid)
        ts.append(time.perf_counter() - t)
        assert r.found
    return median_us(ts)


async def time_page(s: SessionStore, sid: str, msgs: list[str]) -> float:
    """Median microseconds to fetch a branch page of 20 around each message id."""
    ts: list[float] = []
    for m in msgs:
        t = time.perf_counter()
        await recall_observational_memory_branch_page(s, m, session_id=sid, limit=PAGE_LIMIT)
        ts.append(time.perf_counter() - t)
    return median_us(ts)


async def time_aiosqlite_round_trip(path: str) -> float:
    """Median microseconds of one ``SELECT 1`` through aiosqlite."""
    conn = await aiosqlite.connect(path)
    ts: list[float] = []
    for _ in range(SAMPLES):
        t = time.perf_counter()
        await conn.execute_fetchall("SELECT 1")
        ts.append(time.perf_counter() - t)
    await conn.close()
    return median_us(ts)


def time_pk_lookup(c: sqlite3.Connection, msgs: list[str]) -> float:
    """Median microseconds of a plain ``sqlite3`` primary-key lookup of each message."""
    ts: list[float] = []
    for m in msgs:
        t = time.perf_counter()
        c.execute("SELECT body FROM entries WHERE id = ?", (m,)).fetchone()
        ts.append(time.perf_counter() - t)
    return median_us(ts)


async def main(path: str) -> None:
    """Print the recall, page, round-trip and primary-key lookup figures for ``path``."""
    s = await open_store(f"sqlite:{path}")
    sid = (await s.sessions())[0]
    await s.memory_subset(sid, [])
    # pick observation ids from the fold table directly
    c = sqlite3.connect(path)
    ids, msgs = sample_ids(c)
    rec = await time_recall(s, sid, ids)
    page = await time_page(s, sid, msgs)
    rt = await time_aiosqlite_round_trip(path)
    pk = time_pk_lookup(c, msgs)
    count = await s.entry_count(sid)
    print(
        f"entries {count:,}: recall {rec:.0f} us, page of 20 {page:.0f} us, "
        f"aiosqlite round trip {rt:.0f} us, plain sqlite3 PK lookup {pk:.1f} us"
    )
    await s.close()


def parse_args() -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", help="path of an existing SQLite store")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args().file))
