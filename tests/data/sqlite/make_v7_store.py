"""Rebuild ``store-v7.db``: a SQLite store written by schema version 7, the fixture the
version 7 -> 8 migration tests open.

Version 7 is the last whose search index held one ``search_terms`` row per posting;
version 8 packs the postings into ``search_blocks`` rows. It was generated with the code
of commit 83c1071, exported outside any worktree (``git archive 83c1071 | tar -x -C
/tmp/v7``, then ``PYTHONPATH=/tmp/v7 python tests/data/sqlite/make_v7_store.py``). Do not
regenerate it with later code: its point is to be what version 7 wrote.

It holds two random memory sessions (messages, observations, reflections, drops,
compactions, scope records, forks) and ``agents``: a ``PrismSession`` history (one entry
per item) with memory observed by the offline observer over it. Every session was
searched once, so the index holds its messages (a message's postings are written by the
first search that reaches it), and then grew: ``om-g`` by messages the index does not hold
yet (its ``search_indexed`` mark lags), ``om-h`` by a fork from the middle of its branch.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

# One of each shape the SDK hands a session: the items of the version 6 fixture (run as a
# script, this directory is on the path).
from make_v6_store import ITEMS

from prism_om.entries import message_entry
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, random_builder

TARGET = Path(__file__).resolve().parent / "store-v7.db"


async def build(path: Path) -> None:
    from prism_om.attach import create_observational_memory
    from prism_om.integrations.openai_agents import PrismSession
    from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

    async with await SqliteStore.open(path) as store:
        for seed, sid in ((7, "om-g"), (23, "om-h")):
            builder = random_builder(seed, 140, session_id=sid, operations=SUPERSESSION_OPERATIONS)
            entries = builder.entries
            for start in range(0, len(entries), 13):
                await store.append_many(entries[start : start + 13])
            await store.checkout(sid, builder.path[-1].id)
        workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
        memory = create_observational_memory(
            observation={**workers, "messageTokens": 60},
            reflection={**workers, "observationTokens": 400},
        )
        session = PrismSession("agents", store, memory=memory)
        await session.add_items(ITEMS[:2])
        await session.add_items([{"role": "user", "content": "Popped soon."}])
        await session.pop_item()
        await session.add_items(ITEMS[2:])
        for n in range(12):
            await session.add_items(
                [
                    {"role": "user", "content": f"Turn {n}: the gateway rollout step {n} is done."},
                    {
                        "id": f"msg_t{n}",
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [
                            {"type": "output_text", "text": f"Step {n} logged.", "annotations": []}
                        ],
                    },
                ]
            )
        await session.flush(force=True)
        await session.close()
        # The first search of each session indexes its messages.
        for sid in ("om-g", "om-h", "agents"):
            await store.search(sid, "billing export gateway rollout step", limit=5)
        # Then om-g grows past its mark, and om-h forks from the middle of its branch.
        tail = await store.leaf("om-g")
        for n in range(6):
            entry = message_entry(
                "om-g", "user", f"After the search: billing note {n}.", parent_id=tail
            )
            tail = (await store.append_at_leaf([entry]))[0].id
        branch = await store.entries("om-h")
        middle = next(e for e in branch[len(branch) // 2 :] if e.kind == "message")
        await store.checkout("om-h", middle.id)
        await store.append_at_leaf(
            [message_entry("om-h", "user", "A fork after the search: the gateway rollout moves.")]
        )


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
            "segments",
            "search_terms",
            "search_indexed",
        )
    }
    items = conn.execute(
        "SELECT count(*) FROM entries WHERE custom_type = 'openai-agents.item'"
    ).fetchone()[0]
    conn.close()
    print(f"wrote {TARGET} (user_version {version}, {counts}, {items} item entries)")


if __name__ == "__main__":
    main()
