"""``prism-om migrate``: an older store brought to this version on purpose, nothing lost.

The read commands open stores read-only, which never migrates: an older file is refused
with a message naming ``prism-om migrate``. The command migrates the committed fixtures of
every released version to answers equal to the fixture's own rows, keeps a backup when
asked, refuses what it cannot do (a newer file, a backup path in use, a memory store)
leaving the store exactly as it was, and on PostgreSQL migrates a store set back a version.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import pytest
from support.cli import failed, ok, run_cli
from support.old_stores import (
    FIXTURES,
    copy_of,
    digest,
    fixture_entries,
    reference_store,
    version_of,
)

from prism_om.cli.app import main
from prism_om.stores import open_store
from prism_om.stores._schema import SCHEMA_VERSION

RELEASED = sorted(int(p.stem.removeprefix("store-v")) for p in FIXTURES.glob("store-v*.db"))


async def _same_as_reference(path: Path, fixture: Path) -> None:
    reference = await reference_store(fixture)
    try:
        async with await open_store(f"sqlite:{path}", read_only=True, create=False) as store:
            assert await store.sessions() == await reference.sessions()
            for sid in await reference.sessions():
                assert await store.list(sid) == await reference.list(sid)
                assert await store.leaf(sid) == await reference.leaf(sid)
                assert await store.ledger(sid) == await reference.ledger(sid)
    finally:
        await reference.close()


async def _same_rows(backup: Path, fixture: Path) -> None:
    copied, leaves = fixture_entries(backup)
    assert (copied, leaves) == fixture_entries(fixture)


@pytest.mark.parametrize("version", RELEASED)
def test_an_older_store_is_refused_by_reads_then_migrated(tmp_path: Path, version: int) -> None:
    db = copy_of(version, tmp_path)
    before = digest(db)
    line = failed(run_cli("sessions", "--db", str(db), cwd=tmp_path), 1)
    assert f"prism-om migrate --db {db}" in line and f"schema version {version}" in line
    assert digest(db) == before  # the refused read changed nothing

    report = json.loads(ok(run_cli("migrate", "--db", str(db), "--json", cwd=tmp_path)))
    assert report == {
        "url": f"sqlite:{db}",
        "from": version,
        "to": SCHEMA_VERSION,
        "migrated": True,
        "backup": None,
    }
    assert version_of(db) == SCHEMA_VERSION
    asyncio.run(_same_as_reference(db, FIXTURES / f"store-v{version}.db"))
    ok(run_cli("sessions", "--db", str(db), cwd=tmp_path))
    # Again: nothing to do, and it says so.
    again = ok(run_cli("migrate", "--db", str(db), cwd=tmp_path))
    assert f"schema version {SCHEMA_VERSION} already" in again


def test_backup_keeps_the_file_as_it_was(tmp_path: Path) -> None:
    version = RELEASED[-1]
    db = copy_of(version, tmp_path)
    before = digest(db)
    backup = tmp_path / "before-migrate.db"
    out = ok(run_cli("migrate", "--db", str(db), "--backup", str(backup), cwd=tmp_path))
    assert f"from schema version {version} to {SCHEMA_VERSION}" in out and str(backup) in out
    assert version_of(backup) == version and version_of(db) == SCHEMA_VERSION
    # The backup holds what the file held: the fixture's rows, at the fixture's version.
    asyncio.run(_same_rows(backup, FIXTURES / f"store-v{version}.db"))
    assert before != digest(db)


def test_a_backup_path_in_use_is_refused_before_anything_changes(tmp_path: Path) -> None:
    db = copy_of(RELEASED[-1], tmp_path)
    before = digest(db)
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"someone's file")
    line = failed(run_cli("migrate", "--db", str(db), "--backup", str(taken), cwd=tmp_path), 2)
    assert "exists already" in line
    assert digest(db) == before and taken.read_bytes() == b"someone's file"


def test_a_newer_store_is_refused_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    assert main(["demo", "--db", str(db)]) == 0
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = digest(db)
    line = failed(run_cli("migrate", "--db", str(db), cwd=tmp_path), 1)
    assert f"schema version {SCHEMA_VERSION + 1}" in line
    assert digest(db) == before


def test_what_cannot_be_migrated_is_a_usage_error(tmp_path: Path) -> None:
    assert "no stored schema" in failed(run_cli("migrate", "--db", "memory:", cwd=tmp_path), 2)
    missing = tmp_path / "missing.db"
    assert "no store at" in failed(run_cli("migrate", "--db", str(missing), cwd=tmp_path), 2)
    assert not missing.exists()


async def _set_back_one_version(postgres_url: str) -> None:
    import psycopg
    from psycopg import sql as pgsql

    from prism_om.stores.postgres.store import split_postgres_url
    from prism_om.stores.sql.search_index import postings_of_block

    conninfo, schema, _ = split_postgres_url(postgres_url)

    # Version 8 packed a message's search postings into search_blocks: with them a row
    # each in search_terms again, without search_blocks, and stamped 7, the store is a
    # version 7.
    def name(table: str) -> pgsql.Composed:
        return pgsql.SQL("{}").format(pgsql.Identifier(schema, table))

    async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
        cursor = await conn.execute(
            pgsql.SQL("SELECT term, segment_id, block, postings FROM {}").format(
                name("search_blocks")
            )
        )
        rows = [
            (term, segment_id, depth, 0, 0)
            for term, segment_id, block, packed in await cursor.fetchall()
            for depth in postings_of_block(block, bytes(packed))
        ]
        async with conn.cursor() as insert:
            await insert.executemany(
                pgsql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s)").format(
                    name("search_terms")
                ),
                rows,
            )
        await conn.execute(pgsql.SQL("DROP TABLE {}").format(name("search_blocks")))
        await conn.execute(
            pgsql.SQL("UPDATE {} SET value = %s WHERE name = 'schema_version'").format(
                name("prism_meta")
            ),
            (str(SCHEMA_VERSION - 1),),
        )


def test_postgres_store_set_back_a_version_is_migrated(postgres_url: str, tmp_path: Path) -> None:
    assert SCHEMA_VERSION == 8, "set_back_one_version emulates version 7: update it"
    assert main(["demo", "--db", postgres_url]) == 0

    async def before() -> dict[str, object]:
        async with await open_store(postgres_url, read_only=True) as store:
            return {sid: await store.list(sid) for sid in await store.sessions()}

    kept = asyncio.run(before())
    asyncio.run(_set_back_one_version(postgres_url))
    line = failed(run_cli("sessions", "--db", postgres_url, cwd=tmp_path), 1)
    assert "prism-om migrate --db URL" in line
    report = json.loads(ok(run_cli("migrate", "--db", postgres_url, "--json", cwd=tmp_path)))
    assert (report["from"], report["to"], report["migrated"]) == (
        SCHEMA_VERSION - 1,
        SCHEMA_VERSION,
        True,
    )
    assert asyncio.run(before()) == kept
