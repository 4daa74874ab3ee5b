"""SQLite ``append_many`` of 100 and single appends: this checkout beside the commit before
branch appends3 (its chain path: a message chain placed and bound at its first entry).

Both versions run in ONE process, alternating call by call (the order flips every round),
each on its own store holding the same session of ``--entries`` entries; beside them the
floor of ``bench/floor.py`` (encode + ``executemany`` + commit on a plain table) encoded
with each version's own ``payload_json``/``count_entry``, and openai-agents'
``SQLiteSession.add_items`` when installed. The older commit is imported as a package of
another name (``git archive``), so its entries are rebuilt from the wire with its own
classes. Prints the median wall time and the median CPU time (``time.process_time``: every
thread of the process, so the writer thread's work is counted) of each arm.

Usage: python bench/adhoc/appends_ab.py [--base COMMIT] [--entries N] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench.data import SESSION_ID, build_dataset, continuation
from prism_om.entries import SessionEntry

ROOT = Path(__file__).resolve().parents[2]
OLD = "prism_om_base"
FLOOR_SCHEMA = (
    "CREATE TABLE entries (seq INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, "
    "session_id TEXT NOT NULL, parent_id TEXT, kind TEXT NOT NULL, timestamp TEXT NOT NULL, "
    "tokens INTEGER NOT NULL, body TEXT NOT NULL)"
)
FLOOR_INSERT = (
    "INSERT INTO entries (id, session_id, parent_id, kind, timestamp, tokens, body) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def import_base(commit: str, workdir: str) -> Any:
    """The package as of ``commit``, importable as ``prism_om_base``."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "prism_om", "schema.sql"],
        check=True,
        capture_output=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", workdir], input=archive, check=True)
    os.rename(os.path.join(workdir, "prism_om"), os.path.join(workdir, OLD))
    sys.path.insert(0, workdir)
    return importlib.import_module(OLD)


def floor_arm(path: str, package: str) -> Callable[[list[Any]], Awaitable[None]]:
    """The floor's append, encoding with ``package``'s own functions."""
    rows = importlib.import_module(f"{package}.stores._rows")
    tokens = importlib.import_module(f"{package}.tokens")
    estimator = tokens.get_estimator()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute(FLOOR_SCHEMA)

    async def append(entries: list[Any]) -> None:
        conn.executemany(
            FLOOR_INSERT,
            [
                (
                    e.id,
                    e.session_id,
                    e.parent_id,
                    e.kind,
                    e.timestamp,
                    estimator.count_entry(e),
                    rows.payload_json(e),
                )
                for e in entries
            ],
        )
        conn.commit()

    return append


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--base", default="4ae1ce9", help="the older commit (default: 4ae1ce9, before appends3)"
    )
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="appends3-ab-")
    import_base(args.base, workdir)
    old_entries = importlib.import_module(f"{OLD}.entries")
    old_stores = importlib.import_module(f"{OLD}.stores.sqlite")
    from prism_om.stores.sqlite import SqliteStore

    dataset = build_dataset(args.entries)
    extra = continuation(dataset, args.rounds * 101, "x")

    def as_old(entries: list[SessionEntry]) -> list[Any]:
        return [old_entries.entry_from_wire(e.to_wire()) for e in entries]

    new_store = await SqliteStore.open(os.path.join(workdir, "new.db"))
    old_store = await old_stores.SqliteStore.open(os.path.join(workdir, "old.db"))
    for i in range(0, len(dataset.entries), 1000):
        chunk = dataset.entries[i : i + 1000]
        await new_store.append_many(chunk)
        await old_store.append_many(as_old(chunk))
    arms: dict[str, tuple[Callable[[Any], Awaitable[Any]], Callable[[Any], Any]]] = {
        "new append_many": (new_store.append_many, lambda b: b),
        "base append_many": (old_store.append_many, as_old),
        "floor (new encode)": (floor_arm(os.path.join(workdir, "fn.db"), "prism_om"), list),
        "floor (base encode)": (floor_arm(os.path.join(workdir, "fo.db"), OLD), as_old),
    }
    singles: dict[str, tuple[Callable[[Any], Awaitable[Any]], Callable[[Any], Any]]] = {
        "new append": (new_store.append, lambda e: e),
        "base append": (old_store.append, lambda e: as_old([e])[0]),
    }
    peer = None
    try:
        from agents.memory import SQLiteSession

        peer = SQLiteSession(SESSION_ID, os.path.join(workdir, "peer.db"))
        arms["SQLiteSession.add_items(100)"] = (
            peer.add_items,
            lambda b: [{"role": e.role, "content": e.message.content} for e in b],
        )
        singles["SQLiteSession.add_items(1)"] = (
            peer.add_items,
            lambda e: [{"role": e.role, "content": e.message.content}],
        )
    except ImportError:
        pass
    wall: dict[str, list[float]] = {name: [] for name in (*arms, *singles)}
    cpu: dict[str, list[float]] = {name: [] for name in wall}
    for n in range(args.rounds):
        batch = extra[n * 101 : n * 101 + 100]
        single = extra[n * 101 + 100]
        # The store appends continue their own branch; the floor and the peer just add.
        order = list(arms.items()) if n % 2 else list(reversed(arms.items()))
        for name, (call, convert) in order:
            arg = convert(batch)
            t, c = time.perf_counter(), time.process_time()
            await call(arg)
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
        order = list(singles.items()) if n % 2 else list(reversed(singles.items()))
        for name, (call, convert) in order:
            arg = convert(single)
            t, c = time.perf_counter(), time.process_time()
            await call(arg)
            wall[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
    await new_store.close()
    await old_store.close()
    if peer is not None:
        peer.close()
    print(
        f"{args.rounds} rounds on a {args.entries:,}-entry session, base {args.base}, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'arm':32s} {'wall µs':>9s} {'cpu µs':>9s}")
    for name in wall:
        print(
            f"{name:32s} {statistics.median(wall[name]) * 1e6:9.1f} "
            f"{statistics.median(cpu[name]) * 1e6:9.1f}"
        )
    for which in ("new", "base"):
        ours = statistics.median(wall[f"{which} append_many"])
        floor = statistics.median(wall[f"floor ({which} encode)"])
        print(f"{which}: append_many / its floor = {ours / floor:.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
