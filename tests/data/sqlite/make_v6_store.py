"""Rebuild ``store-v6.db``: a SQLite store written by schema version 6, the fixture the
version 6 -> 7 migration tests open.

Version 6 is the last whose ``PrismSession`` stored each SDK item as two entries (a
message entry, then a custom ``openai-agents.item`` entry holding the item verbatim);
version 7 keeps one entry per item and still reads the two-entry shape. It was generated
with the code of commit e8faa2c, exported outside any worktree (``git archive e8faa2c |
tar -x -C /tmp/v6``, then ``PYTHONPATH=/tmp/v6 python tests/data/sqlite/make_v6_store.py``).
Do not regenerate it with later code: its point is to be what version 6 wrote.

It holds two random memory sessions (messages, observations, reflections, drops,
compactions, scope records, forks) and ``agents``: a ``PrismSession`` history with an
item of every shape ``ITEMS`` lists, one popped item and one clear (so its leaf is on a
later branch), and memory observed by the offline observer over it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, random_builder

TARGET = Path(__file__).resolve().parent / "store-v6.db"

# One of each shape the SDK hands a session: what the migration test expects back.
ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "The billing export runs at 02:00 UTC; Priya owns it."},
    {
        "id": "msg_a1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Noted: 02:00 UTC, Priya.", "annotations": []}],
    },
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Here is the dashboard:"},
            {"type": "input_image", "image_url": "https://example.com/d.png", "detail": "auto"},
        ],
    },
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Check."}]},
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "ls",
        "arguments": '{"path": "/srv/export"}',
        "status": "completed",
    },
    {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": "total 8\n-rw-r--r-- 1 priya 4096 Mar  2 02:00 billing-2026-03-02.csv",
    },
    {"role": "system", "content": "Be brief."},
    {
        "id": "msg_a2",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "I cannot share credentials."}],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed"},
]


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
        await session.clear_session()
        await session.add_items(ITEMS[:1])
        await session.close()


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
        for table in ("entries", "om_observations", "om_reflections", "segments", "search_terms")
    }
    items = conn.execute(
        "SELECT count(*) FROM entries WHERE custom_type = 'openai-agents.item'"
    ).fetchone()[0]
    conn.close()
    print(f"wrote {TARGET} (user_version {version}, {counts}, {items} item entries)")


if __name__ == "__main__":
    main()
