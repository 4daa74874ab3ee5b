"""Rebuild ``store-v5.db``: a SQLite store written by schema version 5 (the search index
written in every append, before the version 6 ``search_indexed`` marks), the fixture the
version 5 -> 6 migration tests open.

It was generated with the code of commit 46f7ad3, exported outside any worktree
(``git archive 46f7ad3 | tar -x -C /tmp/v5``, then
``PYTHONPATH=/tmp/v5 python tests/data/sqlite/make_v5_store.py``). Do not regenerate it
with later code: its point is to be what version 5 wrote. The sessions hold messages,
observations, reflections (some superseded), drops, compactions, scope records and
forks, so the marks meet segments of every kind.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, random_builder

TARGET = Path(__file__).resolve().parent / "store-v5.db"


async def build(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        for seed, sid in ((7, "om-e"), (23, "om-f")):
            builder = random_builder(seed, 140, session_id=sid, operations=SUPERSESSION_OPERATIONS)
            entries = builder.entries
            for start in range(0, len(entries), 13):
                await store.append_many(entries[start : start + 13])
            await store.checkout(sid, builder.path[-1].id)


def main() -> None:
    TARGET.unlink(missing_ok=True)
    asyncio.run(build(TARGET))
    conn = sqlite3.connect(TARGET)
    # Fold the WAL into the file, so the fixture is one self-contained file.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    counts = {
        table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
        for table in (
            "entries",
            "om_observations",
            "om_reflections",
            "om_drops",
            "om_supersessions",
            "om_scope_records",
            "segments",
            "search_terms",
        )
    }
    conn.close()
    print(f"wrote {TARGET} (user_version {version}, {counts})")


if __name__ == "__main__":
    main()
