"""Issue figures: append_many of 100k messages per adapter vs executemany; branch() with 50 forks.

Usage: python bench/adhoc/store_figures.py [--entries N]

``append_many`` of N (default 100,000) messages on every adapter beside plain ``sqlite3``
``executemany`` (+ token encoding), and ``branch()`` on an N-entry session with 50 forks
beside a plain indexed ``SELECT``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time

from prism_om.entries import SessionEntry
from prism_om.stores import SessionStore, open_store
from prism_om.testing.generate import make_message
from prism_om.tokens import TokenEstimator, get_estimator

DEFAULT_ENTRIES = 100_000
FORKS = 50
BRANCH_REPEATS = 5


def messages(sid: str, n: int) -> list[SessionEntry]:
    """A linear chain of ``n`` alternating user/assistant messages in session ``sid``."""
    out: list[SessionEntry] = []
    parent = None
    for i in range(n):
        e = make_message(
            sid,
            f"{sid}-{i}",
            parent,
            "user" if i % 2 == 0 else "assistant",
            f"message {i} about the deploy budget {i % 97} and friday",
            i,
        )
        out.append(e)
        parent = e.id
    return out


def scheme(url: str) -> str:
    """The adapter name of a store URL (the part before the colon)."""
    return url.split(":")[0]


def floor_seconds(entries: list[SessionEntry], est: TokenEstimator, path: str) -> float:
    """Seconds to encode, serialise and ``executemany`` the entries into a plain table."""
    t = time.perf_counter()
    rows = [
        (e.id, e.session_id, e.parent_id, e.model_dump_json(by_alias=True), est.count_entry(e))
        for e in entries
    ]
    c = sqlite3.connect(path)
    c.execute("PRAGMA journal_mode=WAL")
    c.execute("CREATE TABLE t (id TEXT PRIMARY KEY, s TEXT, p TEXT, body TEXT, tokens INT)")
    c.executemany("INSERT INTO t VALUES (?,?,?,?,?)", rows)
    c.commit()
    return time.perf_counter() - t


async def append_seconds(url: str, entries: list[SessionEntry]) -> float:
    """Seconds for one ``append_many`` of the entries into a fresh store at ``url``."""
    store = await open_store(url)
    t = time.perf_counter()
    await store.append_many(entries)
    dt = time.perf_counter() - t
    await store.close()
    return dt


async def build_forked_session(store: SessionStore, sid: str, n: int, rng: random.Random) -> None:
    """Append ``n`` messages to ``sid``, re-parenting onto a recent entry at 50 fork points."""
    ids: list[str] = []
    parent = None
    batch: list[SessionEntry] = []
    fork_points = set(rng.sample(range(1000, n - 1000), FORKS))
    for i in range(n):
        if i in fork_points:
            await store.append_many(batch)
            batch = []
            parent = ids[rng.randrange(len(ids) - 500, len(ids) - 1)]
        e = make_message(sid, f"f-{i}", parent, "user", f"m {i}", i)
        batch.append(e)
        ids.append(e.id)
        parent = e.id
    await store.append_many(batch)


async def time_branch(store: SessionStore, sid: str) -> tuple[list[SessionEntry], list[float]]:
    """The branch of ``sid`` and the seconds each of five ``branch()`` calls took."""
    times: list[float] = []
    br: list[SessionEntry] = []
    for _ in range(BRANCH_REPEATS):
        t = time.perf_counter()
        br = await store.entries(sid)
        times.append(time.perf_counter() - t)
    return br, times


def report_plain_select(path: str, sid: str, branch: list[SessionEntry]) -> None:
    """Print the time of a plain indexed SELECT of the session's rows and of parsing them."""
    c = sqlite3.connect(path)
    wanted = [e.id for e in branch]
    t = time.perf_counter()
    got = c.execute("SELECT body FROM entries WHERE session_id = ? ORDER BY seq", (sid,)).fetchall()
    plain_sql = time.perf_counter() - t
    t = time.perf_counter()
    _parsed = [SessionEntry.model_validate_json(b[0]) for b in got[: len(wanted)]]
    parse = time.perf_counter() - t
    print(
        f"plain indexed SELECT of the session's {len(got):,} rows: {plain_sql * 1000:.0f} ms "
        f"(+{parse * 1000:.0f} ms to parse {len(wanted):,} as entries)"
    )


async def main(n: int) -> None:
    """Print the append_many figures, then the branch() figures."""
    est = get_estimator()
    entries = messages("s", n)
    d = tempfile.mkdtemp()
    # floor: plain executemany of the same rows + token encoding of the same texts
    floor = floor_seconds(entries, est, f"{d}/floor.db")
    print(f"floor executemany+encode+serialise: {floor:.2f}s = {n / floor:,.0f}/s")
    for url in ("memory:", f"jsonl:{d}/j", f"sqlite:{d}/s.db"):
        dt = await append_seconds(url, entries)
        print(
            f"{scheme(url):7s} append_many {n // 1000}k: {dt:.2f}s = {n / dt:,.0f}/s "
            f"({dt / floor:.2f}x floor)"
        )
    # branch with 50 forks on a 100k session
    rng = random.Random(7)
    for url in ("memory:", f"jsonl:{d}/j2", f"sqlite:{d}/b.db"):
        store = await open_store(url)
        sid = "f"
        await build_forked_session(store, sid, n, rng)
        br, times = await time_branch(store, sid)
        print(
            f"{scheme(url):7s} branch() of {len(br):,} entries on a {n:,}-entry session "
            f"with {FORKS} forks: {statistics.median(times) * 1000:.0f} ms"
        )
        if url.startswith("sqlite"):
            report_plain_select(url[7:], sid, br)
        await store.close()


def parse_args() -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--entries",
        type=int,
        default=DEFAULT_ENTRIES,
        help=f"messages per workload (default {DEFAULT_ENTRIES})",
    )
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args().entries))
