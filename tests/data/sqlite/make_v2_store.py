"""Rebuild ``store-v2.db``: a SQLite store written by schema version 2 (prism-om before
reflections could supersede each other), the fixture the version 2 -> 3 migration tests
open.

It was generated with the code of commit 36fc767, exported outside any worktree
(``git archive 36fc767 | tar -x -C /tmp/v2``, then
``PYTHONPATH=/tmp/v2 python tests/data/sqlite/make_v2_store.py``). Do not regenerate it
with later code: its point is to be what version 2 wrote. The sessions hold observations,
reflections, drops, compactions and forks (a migration must keep all of them), so that
a consolidating reflection appended after the migration has reflections to supersede.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.om_factories import random_builder

TARGET = Path(__file__).resolve().parent / "store-v2.db"


async def build(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        for seed, sid in ((5, "om-c"), (17, "om-d")):
            builder = random_builder(seed, 120, session_id=sid)
            entries = builder.entries
            for start in range(0, len(entries), 11):
                await store.append_many(entries[start : start + 11])
            await store.checkout(sid, builder.path[-1].id)


def main() -> None:
    TARGET.unlink(missing_ok=True)
    asyncio.run(build(TARGET))
    conn = sqlite3.connect(TARGET)
    # Fold the WAL into the file, so the fixture is one self-contained file.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    count = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    reflections = conn.execute("SELECT count(*) FROM om_reflections").fetchone()[0]
    conn.close()
    print(f"wrote {TARGET} (user_version {version}, {count} entries, {reflections} reflections)")


if __name__ == "__main__":
    main()
