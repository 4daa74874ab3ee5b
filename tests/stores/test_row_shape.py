"""Schema version 4, the row shape: the entry envelope in columns and only the payload in
``body``; reads build entries from those rows without validating them again; the
migration from version 3 on the committed fixture (SQLite) and on a server (PostgreSQL).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest
from psycopg import sql as pgsql
from support.old_stores import reference_store

from prism_om.core.ledger import fold_ledger
from prism_om.core.ledger_views import live_ledger
from prism_om.entries import (
    SessionEntry,
    compaction_entry,
    custom_entry,
    entry_from_wire,
    message_entry,
)
from prism_om.errors import CorruptStoreError
from prism_om.stores import SessionStore, open_store
from prism_om.stores._rows import (
    entries_from_rows,
    message_data_json,
    payload_json,
    stored_entry,
    wire_from_row,
)
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.postgres import split_postgres_url
from prism_om.stores.sqlite import MIGRATIONS, SqliteStore
from prism_om.testing.conformance import snapshot
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, random_builder

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v3.db"


def version_of(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("PRAGMA user_version").fetchone()[0])
    finally:
        conn.close()


# Every column of a version 3-6 entry row, body last (version 7 adds data after it).
_ROW_COLUMNS = (
    "seq, id, session_id, parent_id, kind, role, custom_type, timestamp, depth, segment_id,"
    " tokens, token_encoding, path_tokens, body"
)


def entry_rows(path: Path) -> list[tuple[Any, ...]]:
    """Every column of every entry row but version 7's ``data``, in append order."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(f"SELECT {_ROW_COLUMNS} FROM entries ORDER BY seq").fetchall()
    finally:
        conn.close()


def message_data_rows(path: Path) -> int:
    """How many rows hold a message entry's data (schema version 7's column)."""
    conn = sqlite3.connect(path)
    try:
        return int(
            conn.execute("SELECT count(*) FROM entries WHERE data IS NOT NULL").fetchone()[0]
        )
    finally:
        conn.close()


def row_of(entry: SessionEntry, body: bytes | str | None = None) -> tuple[Any, ...]:
    """The row a version 4 store holds for ``entry`` (stores/_rows.entry_columns)."""
    stored = payload_json(entry).encode() if body is None else body
    data = message_data_json(entry)
    return (
        entry.id,
        entry.session_id,
        entry.parent_id,
        entry.kind,
        entry.timestamp,
        stored,
        None if data is None else data.encode(),
    )


async def every_view(store: SessionStore) -> dict[str, object]:
    """``snapshot`` plus each entry's wire bytes and each leaf's ledgers."""
    view = await snapshot(store)
    for sid in await store.sessions():
        view[f"{sid} bytes"] = [e.to_json() for e in await store.list(sid)]
        for leaf in await store.leaves(sid):
            view[f"{sid} {leaf} ledger"] = await store.ledger(sid, leaf)
            view[f"{sid} {leaf} live"] = await store.live_ledger(sid, leaf)
            view[f"{sid} {leaf} scope"] = await store.scope_map(sid, leaf)
            view[f"{sid} {leaf} compaction"] = await store.last_compaction(sid, leaf)
            view[f"{sid} {leaf} recent"] = await store.recent_messages(sid, 7, leaf)
    return view


async def assert_ledgers_equal_the_fold(store: SessionStore) -> None:
    for sid in await store.sessions():
        for leaf in await store.leaves(sid):
            ledger = fold_ledger(await store.entries(sid, leaf))
            assert await store.ledger(sid, leaf) == ledger
            assert await store.live_ledger(sid, leaf) == live_ledger(ledger)


# -- building entries from rows ---------------------------------------------------------


def every_shape() -> list[SessionEntry]:
    """Entries of every kind and payload shape the wire allows."""
    return [
        message_entry("s", "user", "plain text", entry_id="m1"),
        message_entry(
            "s",
            "user",
            [
                {"type": "text", "text": "look"},
                {"type": "image", "url": "https://example.com/a.png", "mimeType": "image/png"},
                {"type": "image", "data": "aGk="},
            ],
            parent_id="m1",
            entry_id="m2",
        ),
        message_entry(
            "s",
            "assistant",
            [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": "ok é ✓ \u2028"}],
            parent_id="m2",
            entry_id="m3",
            tool_calls=[{"id": "c1", "name": "search", "arguments": {"q": [1, 2.5, None]}}],
        ),
        message_entry("s", "tool", "42", parent_id="m3", entry_id="m4", tool_call_id="c1"),
        entry_from_wire(
            {
                "id": "m5",
                "sessionId": "s",
                "parentId": "m4",
                "kind": "message",
                "timestamp": "2025-01-02T03:04:05.678Z",
                "message": {"role": "assistant", "content": "", "name": "bot"},
            }
        ),
        custom_entry(
            "s",
            {"type": "app.note", "nested": {"a": [1, {"b": None}]}},
            parent_id="m5",
            entry_id="c",
        ),
        compaction_entry("s", "so far", parent_id="c", entry_id="k1"),
        compaction_entry("s", "more", {"type": "om.folded", "n": 3}, parent_id="k1", entry_id="k2"),
        # Schema version 7: a message carrying a host's data (kept in entries.data).
        message_entry(
            "s",
            "user",
            "with data",
            parent_id="k2",
            entry_id="m6",
            data={"type": "host.item", "item": {"n": [1, None, "é"]}},
        ),
    ]


def test_entries_built_from_rows_equal_the_validated_ones() -> None:
    shapes = every_shape()
    for body_type in (bytes, str):
        rows = [
            row_of(e, payload_json(e).encode() if body_type is bytes else payload_json(e))
            for e in shapes
        ]
        built = entries_from_rows(rows)
        for entry, read in zip(shapes, built, strict=True):
            assert read == entry
            assert read.to_json() == entry.to_json()
            assert read.model_fields_set == entry.model_fields_set
            assert read.message == entry.message
            if entry.message is not None:
                assert read.message is not None
                assert read.message.model_fields_set == entry.message.model_fields_set
            # Built entries are as frozen as validated ones.
            with pytest.raises(ValueError):
                read.id = "other"  # type: ignore[misc]


def test_the_payload_is_the_wire_less_the_envelope() -> None:
    for entry in every_shape():
        wire = json.loads(entry.to_json())
        payload = json.loads(payload_json(entry))
        if entry.kind == "message":
            assert payload == wire["message"]
        elif entry.kind == "custom":
            assert payload == wire["data"]
        else:
            rest = {k: v for k, v in wire.items() if k in {"summary", "data"}}
            assert payload == rest
        assert entry_from_wire(wire_from_row(row_of(entry), SCHEMA_VERSION)) == entry


def test_a_bad_row_names_its_entry_and_spares_the_others() -> None:
    good = every_shape()
    cases: dict[str, bytes | str | None] = {
        "m2": b'{"role": "user", "content": [{"type": "video"}]}',
        "m3": b'{"role": "assistant", "content": "unclosed',
        "m4": b'{"content": "no role"}',
        "m5": b"\xff\xfe",
        "c": b'["not", "an", "object"]',
        "k1": b'{"data": {}}',
        "k2": None,
    }
    for bad_id, body in cases.items():
        rows = [(*row_of(e)[:5], body) if e.id == bad_id else row_of(e) for e in good]
        with pytest.raises(CorruptStoreError) as caught:
            entries_from_rows(rows)
        assert caught.value.entry_id == bad_id


def test_the_compatibility_reader_validates_either_shape() -> None:
    # What the migrations read (stores/_rows.stored_entry): a whole wire of version 3 or
    # a payload already rewritten, each validated; a whole wire naming another id refused.
    for entry in every_shape():
        old_row = row_of(entry, entry.to_json().encode())
        assert stored_entry(old_row) == (entry, True)
        assert stored_entry(row_of(entry)) == (entry, False)
    old_row = row_of(every_shape()[2], every_shape()[2].to_json().encode())
    with pytest.raises(CorruptStoreError, match="holds id"):
        stored_entry(("other", *old_row[1:]))


async def test_sqlite_bodies_hold_the_payload_alone(tmp_path: Path) -> None:
    path = tmp_path / "shape.db"
    shapes = every_shape()
    async with await SqliteStore.open(path) as store:
        await store.append_many(shapes[:5])
        await store.append_many(shapes[5:])
    rows = {row[1]: row for row in entry_rows(path)}
    for entry in shapes:
        assert json.loads(rows[entry.id][-1]) == json.loads(payload_json(entry))
        assert "sessionId" not in rows[entry.id][-1]
    # A message entry's data is beside its message payload, in entries.data.
    assert message_data_rows(path) == 1
    assert version_of(path) == SCHEMA_VERSION


async def test_sqlite_reads_do_not_validate_stored_entries_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "trusted.db"
    builder = random_builder(5, 120, session_id="t", operations=SUPERSESSION_OPERATIONS)
    async with await SqliteStore.open(path) as store:
        await load_builder(store, builder)
        expected = await every_view(store)

    def refuse(*args: object, **kwargs: object) -> SessionEntry:
        raise AssertionError("a stored entry was validated again")

    monkeypatch.setattr(SessionEntry, "model_validate_json", refuse)
    monkeypatch.setattr(SessionEntry, "model_validate", refuse)
    async with await SqliteStore.open(path, read_only=True) as store:
        assert await every_view(store) == expected


async def test_a_damaged_payload_is_a_corrupt_store_error(tmp_path: Path) -> None:
    path = tmp_path / "damaged.db"
    shapes = every_shape()
    async with await SqliteStore.open(path) as store:
        await store.append_many(shapes)
    conn = sqlite3.connect(path)
    conn.execute("""UPDATE entries SET body = '{"role": 7}' WHERE id = 'm3'""")
    conn.commit()
    conn.close()
    async with await SqliteStore.open(path) as store:
        for read in (store.get("m3"), store.list("s"), store.entries("s"), store.get_many(["m3"])):
            with pytest.raises(CorruptStoreError, match="'m3'") as caught:
                await read
            assert caught.value.url == store.url
        assert (await store.get("m2")) == shapes[1]


# -- the migration from version 3 (SQLite) ------------------------------------------------


@pytest.fixture
def v3_store(tmp_path: Path) -> Path:
    path = tmp_path / "v3.db"
    shutil.copyfile(FIXTURE, path)
    assert version_of(path) == 3
    return path


def test_the_fixture_is_version_three_with_every_kind_of_row() -> None:
    assert version_of(FIXTURE) == 3
    conn = sqlite3.connect(FIXTURE)
    try:
        kinds = {row[0] for row in conn.execute("SELECT DISTINCT kind FROM entries")}
        bodies = [json.loads(b) for (b,) in conn.execute("SELECT body FROM entries")]
        supersessions = conn.execute("SELECT count(*) FROM om_supersessions").fetchone()[0]
    finally:
        conn.close()
    assert kinds == {"message", "custom", "compaction"}
    assert all("sessionId" in body for body in bodies), "version 3 bodies are whole wires"
    assert supersessions > 0


async def test_a_version_three_store_migrates_and_reads_back_identical(v3_store: Path) -> None:
    # What the fixture's own rows hold, read by the pure folds (support/old_stores.py).
    async with await reference_store(v3_store) as before:
        expected = await every_view(before)
    old_rows = entry_rows(v3_store)
    async with await SqliteStore.open(v3_store) as store:
        assert version_of(v3_store) == SCHEMA_VERSION
        assert await every_view(store) == expected
        await assert_ledgers_equal_the_fold(store)
    new_rows = entry_rows(v3_store)
    assert message_data_rows(v3_store) == 0  # no entry before version 7 carried any
    # Only body changed, to the payload of the entry its old body held.
    assert [r[:-1] for r in new_rows] == [r[:-1] for r in old_rows]
    for old, new in zip(old_rows, new_rows, strict=True):
        assert new[-1] == payload_json(SessionEntry.model_validate_json(old[-1]))
    async with await SqliteStore.open(v3_store) as reopened:
        assert await every_view(reopened) == expected
        sid = (await reopened.sessions())[0]
        leaf = await reopened.leaf(sid)
        more = message_entry(sid, "user", "after the migration", parent_id=leaf)
        await reopened.append(more)
        assert (await reopened.entries(sid))[-1] == more


async def test_a_damaged_row_stops_the_migration_and_leaves_version_three(
    v3_store: Path,
) -> None:
    conn = sqlite3.connect(v3_store)
    (victim,) = conn.execute("SELECT id FROM entries ORDER BY seq DESC LIMIT 1").fetchone()
    conn.execute("UPDATE entries SET body = '{\"id\": broken' WHERE id = ?", (victim,))
    conn.commit()
    conn.close()
    rows = entry_rows(v3_store)
    with pytest.raises(CorruptStoreError, match=repr(victim)) as caught:
        await SqliteStore.open(v3_store)
    assert caught.value.entry_id == victim
    assert caught.value.url == f"sqlite:{v3_store}"
    assert str(v3_store) in str(caught.value)
    assert version_of(v3_store) == 3
    assert entry_rows(v3_store) == rows


async def test_columns_that_disagree_with_the_body_stop_the_migration(v3_store: Path) -> None:
    conn = sqlite3.connect(v3_store)
    (victim,) = conn.execute("SELECT id FROM entries WHERE kind = 'message' LIMIT 1").fetchone()
    conn.execute("UPDATE entries SET timestamp = '1999-01-01T00:00:00Z' WHERE id = ?", (victim,))
    conn.commit()
    conn.close()
    rows = entry_rows(v3_store)
    with pytest.raises(CorruptStoreError, match="disagree") as caught:
        await SqliteStore.open(v3_store)
    assert caught.value.entry_id == victim
    assert version_of(v3_store) == 3
    assert entry_rows(v3_store) == rows


async def test_a_migration_failing_half_way_leaves_version_three(
    v3_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = MIGRATIONS[3]

    async def fails_half_way(conn: aiosqlite.Connection) -> None:
        await real(conn)
        raise RuntimeError("power cut mid-migration")

    steps: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {
        **MIGRATIONS,
        3: fails_half_way,
    }
    monkeypatch.setattr("prism_om.stores.sqlite.connect.MIGRATIONS", steps)
    rows = entry_rows(v3_store)
    with pytest.raises(RuntimeError, match="power cut"):
        await SqliteStore.open(v3_store)
    assert version_of(v3_store) == 3
    assert entry_rows(v3_store) == rows
    monkeypatch.undo()
    async with await SqliteStore.open(v3_store) as store:
        await assert_ledgers_equal_the_fold(store)
    assert version_of(v3_store) == SCHEMA_VERSION


# -- PostgreSQL -------------------------------------------------------------------------


def _set_version_three(postgres_url: str, whole: dict[str, str]) -> None:
    """Take a version 4 schema back to version 3's rows: whole wire JSON in body."""
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        with conn.cursor() as cursor:
            cursor.executemany(
                "UPDATE entries SET body = %s WHERE id = %s",
                [(body, entry_id) for entry_id, body in whole.items()],
            )
        conn.execute("UPDATE prism_meta SET value = '3' WHERE name = 'schema_version'")


def _pg_state(postgres_url: str) -> tuple[int, list[tuple[Any, ...]]]:
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        row = conn.execute("SELECT value FROM prism_meta WHERE name = 'schema_version'").fetchone()
        rows = conn.execute("SELECT id, body FROM entries ORDER BY seq").fetchall()
    assert row is not None
    return int(row[0]), rows


async def _fill(postgres_url: str) -> tuple[dict[str, object], dict[str, str]]:
    builder = random_builder(11, 140, session_id="pg", operations=SUPERSESSION_OPERATIONS)
    async with await open_store(postgres_url) as store:
        await load_builder(store, builder)
        await store.append_many([e.model_copy(update={"session_id": "pg2"}) for e in every_shape()])
        expected = await every_view(store)
        whole = {e.id: e.to_json() for sid in await store.sessions() for e in await store.list(sid)}
    return expected, whole


async def test_postgres_migrates_version_three_rows(postgres_url: str) -> None:
    expected, whole = await _fill(postgres_url)
    version, rows = _pg_state(postgres_url)
    assert version == SCHEMA_VERSION
    assert all("sessionId" not in body for _, body in rows)
    _set_version_three(postgres_url, whole)
    async with await open_store(postgres_url) as store:
        assert await every_view(store) == expected
        await assert_ledgers_equal_the_fold(store)
    version, rows = _pg_state(postgres_url)
    assert version == SCHEMA_VERSION
    for entry_id, body in rows:
        assert body == payload_json(SessionEntry.model_validate_json(whole[entry_id]))


async def test_postgres_damaged_row_leaves_version_three(postgres_url: str) -> None:
    _, whole = await _fill(postgres_url)
    victim = sorted(whole)[len(whole) // 2]
    whole[victim] = '{"id": broken'
    _set_version_three(postgres_url, whole)
    before = _pg_state(postgres_url)
    with pytest.raises(CorruptStoreError, match=repr(victim)) as caught:
        await open_store(postgres_url)
    assert caught.value.entry_id == victim
    assert _pg_state(postgres_url) == before


async def test_rows_already_rewritten_pass_the_migration_unchanged(tmp_path: Path) -> None:
    # A version 4 file stamped 3 (its stamp lagging its rows): the step recognises the
    # payload rows instead of refusing them, and leaves them as they are.
    path = tmp_path / "lagging.db"
    async with await SqliteStore.open(path) as store:
        await store.append_many(every_shape())
        expected = await every_view(store)
    rows = entry_rows(path)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    async with await SqliteStore.open(path) as store:
        assert await every_view(store) == expected
    assert version_of(path) == SCHEMA_VERSION
    assert entry_rows(path) == rows
