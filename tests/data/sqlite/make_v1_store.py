"""Rebuild ``store-v1.db``: a SQLite store written by schema version 1 (prism-om before
per-session summaries), the fixture the migration tests open.

It was generated with the code of commit 5c5cc6f (run from a checkout of that commit:
``python tests/data/sqlite/make_v1_store.py``). Do not regenerate it with later code: its
point is to be what version 1 wrote. The sessions cover what a migration must backfill:
forks (several leaves), memory records, a moved leaf, custom entries, and timestamps of
mixed formats (basic ``20260318 101010`` against extended ISO with offsets).
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from prism_om.entries import custom_entry, message_entry  # noqa: E402
from prism_om.stores.sqlite import SqliteStore  # noqa: E402
from prism_om.testing.om_factories import random_builder  # noqa: E402

TARGET = HERE / "store-v1.db"


async def build(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        for seed, sid in ((11, "om-a"), (23, "om-b")):
            builder = random_builder(seed, 80, session_id=sid)
            entries = builder.entries
            for start in range(0, len(entries), 9):
                await store.append_many(entries[start : start + 9])
            await store.checkout(sid, builder.path[-1].id)
        # Mixed timestamp formats: as strings "20260318 101010" sorts after
        # "2026-03-22...", as times it is four days earlier.
        stamps = [
            "2026-03-17T08:00:00+00:00",
            "2026-03-22T09:30:00.000Z",
            "20260318 101010",
            "2026-03-22T11:00:00+02:00",
        ]
        parent = None
        for n, stamp in enumerate(stamps):
            entry = message_entry(
                "mixed-times",
                "user" if n % 2 == 0 else "assistant",
                f"message {n}",
                parent_id=parent,
                entry_id=f"mixed.{n}",
                timestamp=stamp,
            )
            await store.append(entry)
            parent = entry.id
        await store.append(
            custom_entry(
                "mixed-times",
                {"type": "app.note", "n": 1},
                parent_id="mixed.1",
                entry_id="mixed.fork",
                timestamp="2026-03-19T00:00:00Z",
            )
        )
        await store.checkout("mixed-times", "mixed.3")


def main() -> None:
    TARGET.unlink(missing_ok=True)
    asyncio.run(build(TARGET))
    conn = sqlite3.connect(TARGET)
    # Fold the WAL into the file, so the fixture is one self-contained file.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode = DELETE")
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    count = conn.execute("SELECT count(*) FROM entries").fetchone()[0]
    conn.close()
    print(f"wrote {TARGET} (user_version {version}, {count} entries)")


if __name__ == "__main__":
    main()
