"""Schema version 4 (the om_live pool): the migration from version 3 on the committed
SQLite store of that version and on PostgreSQL, a read-only open of a version 3 store
(refused, unchanged), and a failed migration that leaves version 3 as it was."""

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

from prism_om.core.records import OBSERVATIONS_DROPPED
from prism_om.entries import custom_entry
from prism_om.errors import StoreVersionError
from prism_om.stores import SessionStore, open_store
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.postgres import split_postgres_url
from prism_om.stores.sqlite import MIGRATIONS, SqliteStore
from prism_om.testing.conformance import snapshot
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, random_builder
from tests.stores.test_live_pool import assert_every_point_equals_the_fold, pool_of, rebuilt_pool
from tests.stores.test_supersession_migration import tables_of, version_of

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v3.db"


@pytest.fixture
def v3_store(tmp_path: Path) -> Path:
    path = tmp_path / "v3.db"
    shutil.copyfile(FIXTURE, path)
    assert version_of(path) == 3
    return path


async def drop_one(store: SessionStore, sid: str) -> None:
    """Append a drop of the branch's first live observation."""
    live = await store.live_ledger(sid)
    assert live.observations, "the session holds live observations"
    data = {"type": OBSERVATIONS_DROPPED, "observationIds": [live.observations[0].id]}
    await store.append(custom_entry(sid, data, parent_id=await store.leaf(sid)))
    assert live.observations[0].id not in (await store.live_ledger(sid)).observations_by_id


async def every_session_equals_the_fold(store: SessionStore) -> None:
    sessions = await store.sessions()
    assert sessions
    for sid in sessions:
        await assert_every_point_equals_the_fold(store, sid)


def test_the_fixture_is_version_three_without_the_pool() -> None:
    assert version_of(FIXTURE) == 3
    assert "om_live" not in tables_of(FIXTURE)


async def test_a_version_three_store_migrates_and_its_pools_equal_the_fold(v3_store: Path) -> None:
    async with await reference_store(v3_store) as before:
        seen_before = await snapshot(before)
    async with await SqliteStore.open(v3_store) as store:
        assert version_of(v3_store) == SCHEMA_VERSION
        assert await snapshot(store) == seen_before
        assert pool_of(v3_store), "the backfill made pools"
        await every_session_equals_the_fold(store)
        # Appends after the migration keep the backfilled pools.
        sid = (await store.sessions())[0]
        await drop_one(store, sid)
        await every_session_equals_the_fold(store)
    assert pool_of(v3_store) == await rebuilt_pool(v3_store)


async def test_a_read_only_open_of_version_three_refuses(v3_store: Path) -> None:
    with pytest.raises(StoreVersionError, match="schema version 3, older"):
        await SqliteStore.open(v3_store, read_only=True)
    assert version_of(v3_store) == 3
    assert "om_live" not in tables_of(v3_store)


async def test_a_failed_pool_migration_leaves_version_three(
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
    with sqlite3.connect(v3_store) as conn:
        before = conn.execute("SELECT count(*), max(seq) FROM entries").fetchone()
    conn.close()
    monkeypatch.setattr("prism_om.stores.sqlite.connect.MIGRATIONS", steps)
    with pytest.raises(RuntimeError, match="power cut"):
        await SqliteStore.open(v3_store)
    assert version_of(v3_store) == 3
    assert "om_live" not in tables_of(v3_store)
    with sqlite3.connect(v3_store) as conn:
        assert conn.execute("SELECT count(*), max(seq) FROM entries").fetchone() == before
    conn.close()
    monkeypatch.undo()
    async with await SqliteStore.open(v3_store) as store:
        await every_session_equals_the_fold(store)


async def test_postgres_migrates_version_three_and_backfills_the_pool(postgres_url: str) -> None:
    builder = random_builder(
        8, 150, session_id="pool", operations=(*SUPERSESSION_OPERATIONS, "fork")
    )
    async with await open_store(postgres_url) as store:
        await load_builder(store, builder)
        expected = await store.live_ledger("pool")
    conninfo, schema, _ = split_postgres_url(postgres_url)
    name = pgsql.Identifier(schema)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("DROP TABLE {}.om_live").format(name))
        conn.execute(
            pgsql.SQL("UPDATE {}.prism_meta SET value = '3' WHERE name = 'schema_version'").format(
                name
            )
        )
    # Read-only, the older schema is refused as it is, saying how to migrate it.
    with pytest.raises(StoreVersionError, match="open it once for writing") as caught:
        await open_store(postgres_url, read_only=True)
    assert (caught.value.version, caught.value.supported) == (3, SCHEMA_VERSION)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            pgsql.SQL("SELECT value FROM {}.prism_meta WHERE name = 'schema_version'").format(name)
        ).fetchone()
    assert row is not None and row[0] == "3"
    async with await open_store(postgres_url) as store:
        assert await store.live_ledger("pool") == expected
        await assert_every_point_equals_the_fold(store, "pool")
        await drop_one(store, "pool")
        await assert_every_point_equals_the_fold(store, "pool")
    with psycopg.connect(conninfo, autocommit=True) as conn:
        row = conn.execute(
            pgsql.SQL("SELECT value FROM {}.prism_meta WHERE name = 'schema_version'").format(name)
        ).fetchone()
        pooled = conn.execute(pgsql.SQL("SELECT count(*) FROM {}.om_live").format(name)).fetchone()
    assert row is not None and int(row[0]) == SCHEMA_VERSION
    assert pooled is not None and pooled[0] > 0
