"""Schema version 7: a message entry may carry ``data`` (``entries.data``), and
``PrismSession`` stores each SDK item as one entry.

The committed ``store-v6.db`` (``tests/data/sqlite/make_v6_store.py``, written by the
version 6 code) holds memory sessions and a ``PrismSession`` history in the two-entry item
shape. Migrated, it must answer as its own rows say (``support.old_stores``), rewrite no
row (entry ids are what memory cites), read back every old item exactly, and take new
items in the one-entry shape on the same branch. PostgreSQL migrates the same step.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from support.old_stores import copy_of, reference_store, version_of

from prism_om.entries import message_entry
from prism_om.integrations.openai_agents import ITEM_TYPE, PrismSession
from prism_om.stores import open_store
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.sqlite import SqliteStore

AGENTS = "agents"


def _rows(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT seq, id, body FROM entries ORDER BY seq").fetchall()
    finally:
        conn.close()


def _items_on_branch(path: Path, session_id: str, leaf: str | None = None) -> list[dict[str, Any]]:
    """The session's items as the version 6 rows hold them: the custom item entries on
    the branch of ``leaf`` (else the session's), root first (read with sqlite3 alone)."""
    conn = sqlite3.connect(path)
    try:
        if leaf is None:
            (leaf,) = conn.execute(
                "SELECT leaf_id FROM sessions WHERE session_id = ?", (session_id,)
            ).fetchone()
        rows = {
            r[0]: r[1:]
            for r in conn.execute(
                "SELECT id, parent_id, custom_type, body FROM entries WHERE session_id = ?",
                (session_id,),
            )
        }
    finally:
        conn.close()
    path_ids: list[str] = []
    at: str | None = leaf
    while at is not None:
        path_ids.append(at)
        at = rows[at][0]
    return [json.loads(rows[i][2])["item"] for i in reversed(path_ids) if rows[i][1] == ITEM_TYPE]


def test_the_v6_fixture_holds_the_two_entry_item_shape() -> None:
    from support.old_stores import fixture

    path = fixture(6)
    assert version_of(path) == 6
    conn = sqlite3.connect(path)
    try:
        columns = [r[1] for r in conn.execute("PRAGMA table_info(entries)")]
        named = conn.execute(
            "SELECT count(*) FROM entries WHERE custom_type = ? AND body LIKE '%messageId%'",
            (ITEM_TYPE,),
        ).fetchone()[0]
    finally:
        conn.close()
    assert "data" not in columns
    assert named > 10  # message items stored as a message entry and an item entry


async def test_version_six_migrates_without_rewriting_a_row(tmp_path: Path) -> None:
    db = copy_of(6, tmp_path)
    before = _rows(db)
    async with await reference_store(db) as reference, await SqliteStore.open(db) as store:
        assert version_of(db) == SCHEMA_VERSION
        assert _rows(db) == before
        for sid in ("om-g", "om-h", AGENTS):
            assert await store.entries(sid) == await reference.entries(sid)
            assert await store.ledger(sid) == await reference.ledger(sid)
            assert await store.live_ledger(sid) == await reference.live_ledger(sid)
        # Every old item reads back exactly, on each branch (the cleared history, the
        # popped item's, the current one): by the item rows alone and by whole entries.
        session = PrismSession(AGENTS, store)
        leaves = await store.leaves(AGENTS)
        assert len(leaves) == 3
        longest = 0
        for leaf in leaves:
            await store.checkout(AGENTS, leaf)
            expected = _items_on_branch(db, AGENTS, leaf)
            longest = max(longest, len(expected))
            assert await session.get_items() == expected
            assert await session.get_items(3) == expected[-3:]
        assert longest > 20


async def test_a_migrated_history_takes_new_items_as_one_entry_each(tmp_path: Path) -> None:
    db = copy_of(6, tmp_path)
    new = [
        {"role": "user", "content": "The export moved to 03:00 UTC on Monday 9 March."},
        {
            "id": "msg_new",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Moved to 03:00.", "annotations": []}],
        },
    ]
    async with await SqliteStore.open(db) as store:
        # The history the clear left behind: the longest branch, memory on it.
        leaves = await store.leaves(AGENTS)
        sizes = {leaf: len(await store.entries(AGENTS, leaf)) for leaf in leaves}
        behind = max(sizes, key=sizes.__getitem__)
        await store.checkout(AGENTS, behind)
        expected = _items_on_branch(db, AGENTS, behind)
        count = sizes[behind]
        session = PrismSession(AGENTS, store)
        await session.add_items(new)
        assert len(await store.entries(AGENTS)) == count + 2
        assert await session.get_items() == [*expected, *new]
        assert await session.pop_item() == new[-1]
        # An old two-entry item pops whole: both its entries leave the branch.
        assert await session.pop_item() == new[0]
        assert await session.pop_item() == expected[-1]
        assert await session.get_items() == expected[:-1]


async def test_a_message_entrys_data_round_trips_on_a_migrated_file(tmp_path: Path) -> None:
    db = copy_of(6, tmp_path)
    async with await SqliteStore.open(db) as store:
        leaf = await store.leaf("om-g")
        entry = message_entry(
            "om-g", "user", "kept with its data", parent_id=leaf, data={"type": "host.x", "n": 1}
        )
        await store.append(entry)
        assert await store.get(entry.id) == entry
        assert (await store.entries("om-g"))[-1] == entry
    # And after a reopen, from the file.
    async with await open_store(f"sqlite:{db}", read_only=True) as store:
        assert await store.get(entry.id) == entry


async def test_postgres_version_six_migrates_to_seven(postgres_url: str) -> None:
    import psycopg
    from psycopg import sql as pgsql

    from prism_om.stores.postgres.store import split_postgres_url

    # A version 6 store: entries without message data, then the table as version 6 had
    # it (no data column; every row's was NULL) and its version stamp.
    old = [message_entry("pg", "user", "Priya owns the billing export.")]
    old.append(message_entry("pg", "assistant", "Noted.", parent_id=old[0].id))
    async with await open_store(postgres_url) as store:
        await store.append_many(old)
    conninfo, schema, _ = split_postgres_url(postgres_url)
    table = pgsql.Identifier(schema, "entries")
    meta = pgsql.Identifier(schema, "prism_meta")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        (held,) = conn.execute(
            pgsql.SQL("SELECT count(*) FROM {} WHERE data IS NOT NULL").format(table)
        ).fetchone()
        assert held == 0
        conn.execute(pgsql.SQL("ALTER TABLE {} DROP COLUMN data").format(table))
        conn.execute(
            pgsql.SQL("UPDATE {} SET value = '6' WHERE name = 'schema_version'").format(meta)
        )
    items = [
        {"role": "user", "content": "The export moved to 03:00 UTC."},
        {"type": "reasoning", "id": "rs_1", "summary": []},
    ]
    async with await open_store(postgres_url) as store:
        assert await store.entries("pg") == old
        session = PrismSession("pg", store)
        await session.add_items(items)
        assert await session.get_items() == items
        assert len(await store.entries("pg")) == len(old) + len(items)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        (version,) = conn.execute(
            pgsql.SQL("SELECT value FROM {} WHERE name = 'schema_version'").format(meta)
        ).fetchone()
    assert version == str(SCHEMA_VERSION)
