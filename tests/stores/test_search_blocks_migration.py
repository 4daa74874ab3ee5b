"""Schema version 8 (a message's search postings packed into ``search_blocks``): the
migration from version 7 on the committed SQLite store of that version packs every message
row of ``search_terms`` and deletes it, keeps a memory item's rows and the
``search_indexed`` marks as they were (nothing is indexed again, nothing lost), and every
search then equals the in-memory reference over the fixture's own rows, on every leaf,
the lagging mark and the fork included. The PostgreSQL twin runs the same step on a
server schema put back to version 7's shape."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from support.old_stores import copy_of, reference_store

from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.sql.search_index import BLOCK_SHIFT, block_rows, postings_of_block
from prism_om.stores.sqlite import SqliteStore
from tests.stores.test_search_migration import assert_searches_equal
from tests.stores.test_supersession_migration import tables_of, version_of

Posting = tuple[int, int, int, int, int]
BLOCKS_SQL = "SELECT term, segment_id, block, postings FROM search_blocks"
TERMS_SQL = "SELECT term, segment_id, depth, kind, ordinal FROM search_terms"


def _postings(blocks: list[Any], terms: list[Any]) -> set[Posting]:
    """Every posting the index holds: ``search_blocks`` rows unpacked (messages), with
    the rows of ``search_terms``."""
    found: set[Posting] = {(t, s, d, k, o) for t, s, d, k, o in terms}
    for term, segment_id, block, packed in blocks:
        assert isinstance(packed, bytes)
        found.update((term, segment_id, depth, 0, 0) for depth in postings_of_block(block, packed))
    return found


def test_the_fixture_is_version_seven_with_a_row_per_posting() -> None:
    path = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v7.db"
    assert version_of(path) == 7
    assert "search_terms" in tables_of(path) and "search_blocks" not in tables_of(path)


async def test_version_seven_migrates_packing_every_message_posting(tmp_path: Path) -> None:
    path = copy_of(7, tmp_path)
    with sqlite3.connect(path) as conn:
        before = set(conn.execute(TERMS_SQL).fetchall())
        marks = set(conn.execute("SELECT segment_id, depth FROM search_indexed"))
    conn.close()
    assert before and {r[3] for r in before} == {0, 1, 2}
    async with await SqliteStore.open(path):
        pass
    assert version_of(path) == SCHEMA_VERSION
    with sqlite3.connect(path) as conn:
        blocks = conn.execute(BLOCKS_SQL).fetchall()
        assert _postings(blocks, conn.execute(TERMS_SQL).fetchall()) == before
        assert {k for (k,) in conn.execute("SELECT DISTINCT kind FROM search_terms")} == {1, 2}
        assert set(conn.execute("SELECT segment_id, depth FROM search_indexed")) == marks
    conn.close()
    assert 0 < len(blocks) < sum(1 for r in before if r[3] == 0)  # fewer rows than postings


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
    later = [(5, 1, 10, 0, 0), (5, 1, 255, 0, 0), (6, 1, 255, 0, 0)]
    rows = {(r[0], r[1], r[2]): r[3] for r in block_rows(first)}
    for term, segment_id, block, packed in block_rows(later):
        rows[(term, segment_id, block)] = rows.get((term, segment_id, block), b"") + packed
    assert postings_of_block(0, rows[(5, 1, 0)]) == [3, 9, 10, 255]
    assert postings_of_block(1, rows[(5, 1, 1)]) == [300]
    assert postings_of_block(0, rows[(6, 1, 0)]) == [255]
    ((_t, _s, block, packed),) = block_rows([(7, 2, 2**40 + 17, 0, 0)])
    assert block == 2**40 >> BLOCK_SHIFT and len(packed) == 1
    assert postings_of_block(block, packed) == [2**40 + 17]


async def test_postgres_version_seven_migrates_packing_every_posting(postgres_url: str) -> None:
    """A PostgreSQL schema put back to version 7's shape (every posting a row of
    ``search_terms``, no ``search_blocks``, the stamp 7) packs them at the next open."""
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

    def connect() -> psycopg.Connection[Any]:
        conn = psycopg.connect(conninfo, autocommit=True)
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        return conn

    with connect() as conn:
        postings = _postings(
            conn.execute(BLOCKS_SQL).fetchall(), conn.execute(TERMS_SQL).fetchall()
        )
        marks = set(conn.execute("SELECT segment_id, depth FROM search_indexed").fetchall())
        conn.execute("DELETE FROM search_terms")
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO search_terms VALUES (%s, %s, %s, %s, %s)", sorted(postings)
            )
        conn.execute("DROP TABLE search_blocks")
        conn.execute("UPDATE prism_meta SET value = '7' WHERE name = 'schema_version'")
    assert {p[3] for p in postings} == {0} and marks
    reference = MemoryStore()
    await reference.append_many(entries)
    async with await open_store(postgres_url) as store:
        with connect() as conn:
            terms = conn.execute(TERMS_SQL).fetchall()
            assert _postings(conn.execute(BLOCKS_SQL).fetchall(), terms) == postings
            assert terms == []  # no memory here: every posting was a message's
            assert set(conn.execute("SELECT segment_id, depth FROM search_indexed")) == marks
            (stamp,) = conn.execute(
                "SELECT value FROM prism_meta WHERE name = 'schema_version'"
            ).fetchone()
        assert int(stamp) == SCHEMA_VERSION
        await _search_all(store, reference, "s")
