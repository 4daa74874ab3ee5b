"""Schema version 8 (the search index's postings packed into ``search_blocks``): the
migration from version 7 on the committed SQLite store of that version packs every
``search_terms`` row, drops that table, keeps the ``search_indexed`` marks as they were
(nothing is indexed again, nothing lost), and every search then equals the in-memory
reference over the fixture's own rows, on every leaf, the lagging mark and the fork
included. The PostgreSQL twin runs the same step on a server schema made at version 7."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from support.old_stores import copy_of, reference_store

from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.sql.search_index import block_rows, postings_of_block
from prism_om.stores.sqlite import SqliteStore
from tests.stores.test_search_migration import assert_searches_equal
from tests.stores.test_supersession_migration import tables_of, version_of


def _postings(conn: sqlite3.Connection) -> set[tuple[int, int, int, int, int]]:
    """Every posting ``search_blocks`` holds, unpacked."""
    found: set[tuple[int, int, int, int, int]] = set()
    for term, segment_id, kind, block, packed in conn.execute(
        "SELECT term, segment_id, kind, block, postings FROM search_blocks"
    ):
        assert isinstance(packed, bytes)
        for depth, ordinal in postings_of_block(kind, block, packed):
            found.add((term, segment_id, depth, kind, ordinal))
    return found


def test_the_fixture_is_version_seven_with_a_row_per_posting() -> None:
    path = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v7.db"
    assert version_of(path) == 7
    assert "search_terms" in tables_of(path) and "search_blocks" not in tables_of(path)


async def test_version_seven_migrates_packing_every_posting(tmp_path: Path) -> None:
    path = copy_of(7, tmp_path)
    with sqlite3.connect(path) as conn:
        before = {tuple(r) for r in conn.execute("SELECT * FROM search_terms")}
        marks = set(conn.execute("SELECT segment_id, depth FROM search_indexed"))
    conn.close()
    assert before and {r[3] for r in before} == {0, 1, 2}
    async with await SqliteStore.open(path):
        pass
    assert version_of(path) == SCHEMA_VERSION
    assert "search_terms" not in tables_of(path)
    with sqlite3.connect(path) as conn:
        assert _postings(conn) == before
        assert set(conn.execute("SELECT segment_id, depth FROM search_indexed")) == marks
        (rows,) = conn.execute("SELECT count(*) FROM search_blocks").fetchone()
    conn.close()
    assert rows < len(before)  # packed: fewer rows than postings


async def test_a_migrated_version_seven_store_searches_like_the_reference(
    tmp_path: Path,
) -> None:
    path = copy_of(7, tmp_path)
    async with (
        await reference_store(path) as reference,
        await SqliteStore.open(path) as store,
    ):
        assert await assert_searches_equal(store, reference) > 50


def test_packing_keeps_each_posting_in_depth_order() -> None:
    # Postings of one block arrive in two writes (a later one at greater depths): the
    # concatenation reads back as the union, in depth order.
    first = [(5, 1, 3, 0, 0), (5, 1, 9, 0, 0), (5, 1, 300, 0, 0)]
    later = [(5, 1, 10, 0, 0), (5, 1, 255, 0, 0)]
    rows = {(r[0], r[1], r[2], r[3]): r[4] for r in block_rows(first)}
    for term, segment_id, kind, block, packed in block_rows(later):
        key = (term, segment_id, kind, block)
        rows[key] = rows.get(key, b"") + packed
    assert postings_of_block(0, 0, rows[(5, 1, 0, 0)]) == [(3, 0), (9, 0), (10, 0), (255, 0)]
    assert postings_of_block(0, 1, rows[(5, 1, 0, 1)]) == [(300, 0)]
    memory = [(7, 2, 513, 1, 0), (7, 2, 513, 1, 200), (7, 2, 700, 2, 70_000)]
    unpacked = [
        (term, segment_id, depth, kind, ordinal)
        for term, segment_id, kind, block, packed in block_rows(memory)
        for depth, ordinal in postings_of_block(kind, block, packed)
    ]
    assert sorted(unpacked) == sorted(memory)


@pytest.mark.parametrize("ordinal", [0, 127, 128, 16_383, 16_384, 2**31])
def test_a_memory_postings_ordinal_of_any_size_reads_back(ordinal: int) -> None:
    ((_t, _s, kind, block, packed),) = block_rows([(1, 1, 77, 1, ordinal)])
    assert postings_of_block(kind, block, packed) == [(77, ordinal)]


async def test_postgres_version_seven_migrates_packing_every_posting(postgres_url: str) -> None:
    """A PostgreSQL schema put back to version 7's shape (its postings a row each in
    ``search_terms``, ``search_blocks`` empty, the stamp 7) packs them at the next open."""
    import psycopg
    from psycopg import sql as pgsql

    from prism_om.stores import open_store
    from prism_om.stores.memory import MemoryStore
    from prism_om.stores.postgres.store import split_postgres_url
    from tests.stores.test_search_indexed_by_search import _conversation, _search_all

    entries = _conversation("s", 40)
    async with await open_store(postgres_url) as store:
        await store.append_many(entries[:30])
        await store.search("s", "billing")  # the first thirty indexed, the last ten not
        await store.append_many(entries[30:])
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        packed = conn.execute(
            "SELECT term, segment_id, kind, block, postings FROM search_blocks"
        ).fetchall()
        postings = {
            (term, segment_id, depth, kind, ordinal)
            for term, segment_id, kind, block, raw in packed
            for depth, ordinal in postings_of_block(kind, block, bytes(raw))
        }
        marks = set(conn.execute("SELECT segment_id, depth FROM search_indexed").fetchall())
        conn.execute(
            "CREATE TABLE search_terms (term BIGINT NOT NULL, segment_id BIGINT NOT NULL,"
            " depth BIGINT NOT NULL, kind BIGINT NOT NULL, ordinal BIGINT NOT NULL,"
            " PRIMARY KEY (term, segment_id, depth, kind, ordinal))"
        )
        with conn.cursor() as cursor:
            cursor.executemany("INSERT INTO search_terms VALUES (%s, %s, %s, %s, %s)", postings)
        conn.execute("DELETE FROM search_blocks")
        conn.execute("UPDATE prism_meta SET value = '7' WHERE name = 'schema_version'")
    assert postings and marks
    reference = MemoryStore()
    await reference.append_many(entries)
    async with await open_store(postgres_url) as store:
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
            assert conn.execute("SELECT to_regclass('search_terms')").fetchone() == (None,)
            again = conn.execute("SELECT kind, block, postings FROM search_blocks").fetchall()
            assert sum(len(postings_of_block(k, b, bytes(p))) for k, b, p in again) == len(postings)
            assert set(conn.execute("SELECT segment_id, depth FROM search_indexed")) == marks
            (stamp,) = conn.execute(
                "SELECT value FROM prism_meta WHERE name = 'schema_version'"
            ).fetchone()
        assert int(stamp) == SCHEMA_VERSION
        await _search_all(store, reference, "s")
