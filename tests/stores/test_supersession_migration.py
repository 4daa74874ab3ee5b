"""Schema version 3 (the om_supersessions fold table): the migration from version 2 on a
committed SQLite store of that version, the backfill from stored supersessions on SQLite
and PostgreSQL, and a read-only open of a version 2 file (refused, unchanged)."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiosqlite
import psycopg
import pytest
from psycopg import sql as pgsql
from support.old_stores import reference_store

from prism_om.core.ledger import fold_ledger
from prism_om.core.ledger_views import live_ledger
from prism_om.entries import custom_entry
from prism_om.errors import StoreVersionError
from prism_om.stores import SessionStore, open_store
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.postgres import split_postgres_url
from prism_om.stores.sqlite import MIGRATIONS, SqliteStore
from prism_om.testing.conformance import snapshot
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, random_builder

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v2.db"


def version_of(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    conn.close()
    return version


def tables_of(path: Path) -> set[str]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    conn.close()
    return {name for (name,) in rows}


async def assert_ledgers_equal_the_fold(store: SessionStore) -> int:
    """Every leaf's ledger and live ledger against the pure fold; returns supersessions."""
    seen = 0
    for sid in await store.sessions():
        for leaf in await store.leaves(sid):
            ledger = fold_ledger(await store.entries(sid, leaf))
            assert await store.ledger(sid, leaf) == ledger
            assert await store.live_ledger(sid, leaf) == live_ledger(ledger)
            seen += len(ledger.supersessions)
    return seen


async def consolidate(store: SessionStore, sid: str) -> str:
    """Append one reflection superseding every active reflection of the branch."""
    ledger = await store.live_ledger(sid)
    assert len(ledger.reflections) >= 2, "the fixture holds reflections to consolidate"
    entry = custom_entry(
        sid,
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {
                    "id": "c0c0c0c0c0c0",
                    "text": "Consolidated.",
                    "observationIds": [ledger.observations[0].id],
                    "supersedesReflectionIds": [r.id for r in ledger.reflections],
                }
            ],
        },
        parent_id=await store.leaf(sid),
    )
    await store.append(entry)
    return entry.id


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, path)
    assert version_of(path) == 2
    return path


def test_the_fixture_is_version_two_with_reflections() -> None:
    assert version_of(FIXTURE) == 2
    assert "om_supersessions" not in tables_of(FIXTURE)
    with sqlite3.connect(FIXTURE) as conn:
        assert conn.execute("SELECT count(*) FROM om_reflections").fetchone()[0] > 4
    conn.close()


async def test_a_version_two_store_migrates_and_then_folds_supersessions(old_store: Path) -> None:
    # What the fixture's own rows hold, read by the pure folds (support/old_stores.py).
    async with await reference_store(old_store) as before:
        seen_before = await snapshot(before)
        ledgers_before = {s: await before.ledger(s) for s in await before.sessions()}
    async with await SqliteStore.open(old_store) as store:
        assert version_of(old_store) == SCHEMA_VERSION
        assert "om_supersessions" in tables_of(old_store)
        assert await snapshot(store) == seen_before
        assert {s: await store.ledger(s) for s in await store.sessions()} == ledgers_before
        assert await assert_ledgers_equal_the_fold(store) == 0
        consolidation = await consolidate(store, "om-c")
        assert await assert_ledgers_equal_the_fold(store) > 0
        live = await store.live_ledger("om-c")
        assert [r.id for r in live.reflections] == ["c0c0c0c0c0c0"]
        expected = await store.ledger("om-c")
    async with await SqliteStore.open(old_store) as reopened:
        assert await reopened.ledger("om-c") == expected
        assert (await reopened.get(consolidation)) is not None


async def test_a_read_only_open_of_version_two_refuses(old_store: Path) -> None:
    with pytest.raises(StoreVersionError, match="schema version 2, older"):
        await SqliteStore.open(old_store, read_only=True)
    assert version_of(old_store) == 2
    assert "om_supersessions" not in tables_of(old_store)


async def test_memory_subset_of_a_migrated_version_two_store(old_store: Path) -> None:
    # Reflections recorded at version 2 superseded nothing: none once migrated either.
    async with await SqliteStore.open(old_store) as store:
        sid = (await store.sessions())[0]
        some = [r.id for r in (await store.ledger(sid)).reflections[:2]]
        subset = await store.memory_subset(sid, some)
        assert [r.id for r in subset.reflections] == some and subset.supersessions == ()


async def test_a_failed_supersession_migration_leaves_version_two(
    old_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = MIGRATIONS[2]

    async def fails_half_way(conn: aiosqlite.Connection) -> None:
        await real(conn)
        raise RuntimeError("power cut mid-migration")

    steps: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {
        **MIGRATIONS,
        2: fails_half_way,
    }
    monkeypatch.setattr("prism_om.stores.sqlite.connect.MIGRATIONS", steps)
    with pytest.raises(RuntimeError, match="power cut"):
        await SqliteStore.open(old_store)
    assert version_of(old_store) == 2
    assert "om_supersessions" not in tables_of(old_store)


def supersession_builder() -> object:
    builder = random_builder(3, 150, session_id="sup", operations=SUPERSESSION_OPERATIONS)
    assert builder.model.superseded, "the seed supersedes something"
    return builder


async def test_sqlite_backfill_rebuilds_supersessions_from_the_entries(tmp_path: Path) -> None:
    # A version 3 store with supersessions, taken back to version 2's shape: the
    # migration must find every supersession again in the stored reflection records.
    path = tmp_path / "back.db"
    async with await SqliteStore.open(path) as store:
        await load_builder(store, supersession_builder())  # type: ignore[arg-type]
        expected = await store.ledger("sup")
    assert expected.supersessions
    with sqlite3.connect(path) as conn:
        conn.execute("DROP TABLE om_supersessions")
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    async with await SqliteStore.open(path) as store:
        assert version_of(path) == SCHEMA_VERSION
        assert await store.ledger("sup") == expected
        assert await assert_ledgers_equal_the_fold(store) > 0


async def test_postgres_migrates_version_two_and_backfills(postgres_url: str) -> None:
    async with await open_store(postgres_url) as store:
        await load_builder(store, supersession_builder())  # type: ignore[arg-type]
        expected = await store.ledger("sup")
    assert expected.supersessions
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP TABLE {}.om_supersessions").format(pgsql.Identifier(schema)))
        conn.execute(
            pgsql.SQL("UPDATE {}.prism_meta SET value = '2' WHERE name = 'schema_version'").format(
                pgsql.Identifier(schema)
            )
        )
    async with await open_store(postgres_url) as store:
        assert await store.ledger("sup") == expected
        assert await assert_ledgers_equal_the_fold(store) > 0
        await consolidate(store, "sup")
        assert await assert_ledgers_equal_the_fold(store) > len(expected.supersessions)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            pgsql.SQL("SELECT value FROM {}.prism_meta WHERE name = 'schema_version'").format(
                pgsql.Identifier(schema)
            )
        ).fetchone()
    assert row is not None and int(row[0]) == SCHEMA_VERSION
