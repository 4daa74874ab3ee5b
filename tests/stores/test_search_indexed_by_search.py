"""Schema version 6: a message's search rows are written by the first search that reaches
it, not by its append (``stores/sql/search_index.py``), on SQLite and PostgreSQL.

What must hold: an append writes no message row; a search returns what the in-memory
reference returns, whatever was indexed before it; a second search over the same branch
writes nothing; a fork, a deleted session whose segment ids are reused, two stores
searching at once and a read-only store that cannot write all still give the
reference's hits; the migration from version 5 marks what that version had indexed.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support.old_stores import reference_store

from prism_om.entries import SessionEntry
from prism_om.stores import SessionStore, open_store
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sql.search_index import postings_of_block
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.generate import make_message
from tests.stores.test_search_migration import assert_searches_equal
from tests.stores.test_supersession_migration import tables_of, version_of

V5_FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v5.db"
KIND_MESSAGE = 0

# Messages shaped like a working session: names, dates, figures, a listing.
LINES = [
    "Priya asked for the billing export by Friday 14 March; the CSV must keep the VAT column.",
    "The postgres migration failed at step 3: ERROR duplicate key value violates unique "
    "constraint invoices_pkey",
    "ls -la exports/ -> billing-2025-03.csv 41233 bytes, billing-2025-02.csv 39871 bytes",
    "Moving the deadline to Monday 17 March is fine with Tomás as long as Lisbon signs off.",
    "def export_rows(conn):\n    return conn.execute('SELECT * FROM invoices').fetchall()",
    "Remember: the Lisbon office closes early on Fridays, so send the export before 3 pm.",
]


def _conversation(sid: str, count: int, start: int = 0, parent: str | None = None) -> list[Any]:
    out = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        text = f"{LINES[n % len(LINES)]} (turn {n})"
        entry = make_message(sid, f"{sid}-{n}", parent, role, text, n + 1)
        out.append(entry)
        parent = entry.id
    return out


class Rows:
    """Counts of index rows, read beside the store (plain sqlite3 or psycopg)."""

    def __init__(self, kind: str, where: str) -> None:
        self.kind, self.where = kind, where

    def count(self, table: str, condition: str = "") -> int:
        sql = f"SELECT count(*) FROM {table}" + (f" WHERE {condition}" if condition else "")
        ((found,),) = self._rows(sql)
        return int(found)

    def _rows(self, sql: str) -> list[Any]:
        if self.kind == "sqlite":
            conn = sqlite3.connect(self.where)
            try:
                return conn.execute(sql).fetchall()
            finally:
                conn.close()
        import psycopg

        from prism_om.stores.postgres.store import split_postgres_url

        conninfo, schema, _ = split_postgres_url(self.where)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(f'SET search_path TO "{schema}"')
            return conn.execute(sql).fetchall()

    def messages(self) -> int:
        """How many message postings the index holds (its packed rows unpacked)."""
        return sum(
            len(postings_of_block(block, bytes(packed)))
            for block, packed in self._rows("SELECT block, postings FROM search_blocks")
        )

    def postings(self) -> int:
        """Every posting: the messages' packed, a memory item's a row each."""
        return self.messages() + self.count("search_terms", f"kind <> {KIND_MESSAGE}")


@pytest.fixture(params=["sqlite", "postgres"])
async def opened(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Callable[..., Any], Rows]]:
    if request.param == "sqlite":
        where = str(tmp_path / "store.db")
        url = f"sqlite:{where}"
    else:
        where = url = request.getfixturevalue("postgres_url")

    async def open_(**options: Any) -> SessionStore:
        return await open_store(url, **options)

    yield open_, Rows(request.param, where)


async def _search_all(store: SessionStore, reference: SessionStore, sid: str) -> None:
    for leaf in await reference.leaves(sid):
        for query in ("billing export", "Lisbon Friday", "duplicate key invoices", "Tomás"):
            expected = await reference.search(sid, query, leaf_id=leaf, limit=20)
            got = await store.search(sid, query, leaf_id=leaf, limit=20)
            assert got == expected, (leaf, query)
            assert expected  # every query finds something: the comparison is not vacuous


async def test_appends_write_no_message_rows_and_the_first_search_writes_them(
    opened: tuple[Callable[..., Any], Rows],
) -> None:
    open_, rows = opened
    entries = _conversation("s", 40)
    reference = MemoryStore()
    await reference.append_many(entries)
    async with await open_() as store:
        await store.append_many(entries[:30])
        for entry in entries[30:]:
            await store.append(entry)
        assert rows.messages() == 0
        await _search_all(store, reference, "s")
        indexed = rows.messages()
        assert indexed > 0
        # Nothing new on the branch: the next searches write nothing.
        await _search_all(store, reference, "s")
        assert rows.messages() == indexed
        # Ten more messages: the next search indexes those ten, and only those.
        more = _conversation("s", 10, start=40, parent=entries[-1].id)
        await store.append_many(more)
        await reference.append_many(more)
        assert rows.messages() == indexed
        await _search_all(store, reference, "s")
        grown = rows.messages()
        assert grown > indexed
        per_line = indexed / 40
        assert grown - indexed < per_line * 10 * 1.5  # the ten new ones, not all fifty again


async def test_a_fork_and_its_parent_are_both_indexed_and_isolated(
    opened: tuple[Callable[..., Any], Rows],
) -> None:
    open_, rows = opened
    trunk = _conversation("s", 20)
    fork = [
        make_message("s", "fork-0", trunk[9].id, "user", "Only on the fork: zanzibar invoice", 50),
        make_message("s", "fork-1", "fork-0", "assistant", "Noted, the zanzibar invoice.", 51),
    ]
    reference = MemoryStore()
    await reference.append_many(trunk + fork)
    async with await open_() as store:
        await store.append_many(trunk + fork)
        # Search the fork first: it indexes its own segment and the trunk below the fork.
        hits = await store.search("s", "zanzibar", leaf_id="fork-1")
        assert {h.id for h in hits} == {"fork-0", "fork-1"}
        assert await store.search("s", "zanzibar", leaf_id=trunk[-1].id) == []
        await _search_all(store, reference, "s")
        assert rows.count("search_indexed") >= 2


async def test_a_deleted_sessions_marks_go_with_it(
    opened: tuple[Callable[..., Any], Rows],
) -> None:
    """Segment ids are reused after the newest session goes: a mark left behind would
    hide the new session's messages from its searches."""
    open_, rows = opened
    async with await open_() as store:
        await store.append_many(_conversation("a", 6))
        await store.append_many(_conversation("b", 30))
        assert await store.search("b", "billing export")
        assert rows.count("search_indexed") == 1  # only the branch searched is indexed
        assert await store.search("a", "billing export")
        assert rows.count("search_indexed") == 2
        await store.delete_session("b")
        assert rows.count("search_indexed") == 1
        fresh = [
            make_message("c", "c-0", None, "user", "A quokka appeared in the export.", 1),
            make_message("c", "c-1", "c-0", "assistant", "The quokka is noted.", 2),
        ]
        await store.append_many(fresh)
        hits = await store.search("c", "quokka")
        assert {h.id for h in hits} == {"c-0", "c-1"}


async def test_two_stores_searching_at_once_index_each_message_once(
    opened: tuple[Callable[..., Any], Rows],
) -> None:
    open_, rows = opened
    entries = _conversation("s", 60)
    reference = MemoryStore()
    await reference.append_many(entries)
    async with await open_() as first:
        await first.append_many(entries)
        async with await open_() as second:
            found = await asyncio.gather(
                *(s.search("s", "billing export", limit=50) for s in (first, second, first))
            )
    expected = await reference.search("s", "billing export", limit=50)
    assert found == [expected] * 3
    # Each (term, message) once: the rows equal those of a store indexed alone.
    alone = MemoryStore()
    await alone.append_many(entries)
    async with await open_() as store:
        held = rows.messages()
        await _search_all(store, reference, "s")
        assert rows.messages() == held


async def test_a_read_only_sqlite_store_scans_what_is_not_indexed_and_writes_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store.db"
    entries = _conversation("s", 30)
    reference = MemoryStore()
    await reference.append_many(entries)
    async with await SqliteStore.open(db) as store:
        await store.append_many(entries[:20])
        await store.search("s", "billing")  # the first twenty are indexed
        await store.append_many(entries[20:])  # the last ten are not
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    async with await SqliteStore.open(db, read_only=True) as reader:
        await _search_all(reader, reference, "s")  # a version 6 file: it opens read-only
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert Rows("sqlite", str(db)).count("search_indexed", "depth >= 20") == 0


def test_the_v5_fixture_has_no_marks() -> None:
    assert version_of(V5_FIXTURE) == 5
    assert "search_terms" in tables_of(V5_FIXTURE)
    assert "search_indexed" not in tables_of(V5_FIXTURE)


async def test_version_five_migrates_with_every_segment_marked_indexed(tmp_path: Path) -> None:
    db = tmp_path / "v5.db"
    shutil.copyfile(V5_FIXTURE, db)
    rows = Rows("sqlite", str(db))
    held = rows.count("search_terms")  # a row per posting at version 5
    async with (
        await reference_store(db) as reference,
        await SqliteStore.open(db) as store,
    ):
        assert version_of(db) == SCHEMA_VERSION
        segments = rows.count("segments")
        assert rows.count("search_indexed") == segments > 1
        assert await assert_searches_equal(store, reference) > 50
    # Version 5 had indexed every message: the searches wrote no posting.
    assert rows.postings() == held


async def test_postgres_version_five_migrates_with_every_segment_marked(
    postgres_url: str,
) -> None:
    import psycopg
    from psycopg import sql as pgsql

    from prism_om.stores.postgres.store import split_postgres_url

    entries: list[SessionEntry] = _conversation("s", 30)
    async with await open_store(postgres_url) as store:
        await store.append_many(entries)
        await store.search("s", "billing")  # every message indexed, as version 5 had it
    rows = Rows("postgres", postgres_url)
    held = rows.postings()
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP TABLE {}.search_indexed").format(pgsql.Identifier(schema)))
        conn.execute(
            pgsql.SQL("UPDATE {}.prism_meta SET value = '5' WHERE name = 'schema_version'").format(
                pgsql.Identifier(schema)
            )
        )
    reference = MemoryStore()
    await reference.append_many(entries)
    async with await open_store(postgres_url) as store:
        assert rows.count("search_indexed") == 1
        await _search_all(store, reference, "s")
    assert rows.postings() == held
