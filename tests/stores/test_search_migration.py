"""Schema version 5 (the search index): the migration from version 4 on the committed
SQLite store of that version backfills the index (``search_blocks`` since version 8) so
that every search equals the
in-memory reference over the fixture's own rows, and a read-only open of a version 4
file is refused, unchanged."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest
from support.old_stores import reference_store

from prism_om.errors import StoreVersionError
from prism_om.stores import SessionStore
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.sqlite import SqliteStore
from tests.stores.test_supersession_migration import tables_of, version_of

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v4.db"
QUERIES = ["billing export", "postgres migration", "deadline friday", "lisbon", "the user"]


@pytest.fixture
def v4_store(tmp_path: Path) -> Path:
    path = tmp_path / "v4.db"
    shutil.copyfile(FIXTURE, path)
    assert version_of(path) == 4
    return path


async def assert_searches_equal(store: SessionStore, reference: SessionStore) -> int:
    """Every query on every leaf of every session, both ways; the number of hits seen."""
    seen = 0
    for sid in await reference.sessions():
        for leaf in await reference.leaves(sid):
            for query in QUERIES:
                for inactive in (False, True):
                    expected = await reference.search(
                        sid, query, leaf_id=leaf, limit=100, include_inactive=inactive
                    )
                    got = await store.search(
                        sid, query, leaf_id=leaf, limit=100, include_inactive=inactive
                    )
                    assert got == expected, (sid, leaf, query, inactive)
                    seen += len(got)
    return seen


def test_the_fixture_is_version_four_without_the_index() -> None:
    assert version_of(FIXTURE) == 4
    assert "search_terms" not in tables_of(FIXTURE)


async def test_a_version_four_store_migrates_and_searches_like_the_reference(
    v4_store: Path,
) -> None:
    # The fixture's entries as its rows hold them (support/old_stores.py).
    async with (
        await reference_store(v4_store) as reference,
        await SqliteStore.open(v4_store) as store,
    ):
        assert version_of(v4_store) == SCHEMA_VERSION
        assert await assert_searches_equal(store, reference) > 50
    with sqlite3.connect(v4_store) as conn:
        (rows,) = conn.execute("SELECT count(*) FROM search_blocks").fetchone()
        kinds = {k for (k,) in conn.execute("SELECT DISTINCT kind FROM search_terms")}
    conn.close()
    assert rows > 0 and kinds == {1, 2}  # messages packed; observations and reflections


async def test_a_read_only_open_of_version_four_refuses(v4_store: Path) -> None:
    with pytest.raises(StoreVersionError, match="schema version 4, older"):
        await SqliteStore.open(v4_store, read_only=True)
    assert version_of(v4_store) == 4
    assert "search_terms" not in tables_of(v4_store)
    assert "search_blocks" not in tables_of(v4_store)
