"""Two processes opening one new SQLite file at once (found by
``test_two_processes_append_to_one_file`` under load): the one that is second must see the
other's store, never "tables but no schema version".

The race is made deterministic: the other process's creation of the schema (its tables and
version stamp, committed together, as ``_apply_schema`` does) is landed right after the
opening connection's first read of the file's state. Read in two statements (the version,
then the tables), the open saw a version of 0 and then tables: a foreign file. Read in one,
it sees one moment or the other, and either is a store it can open.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import message_entry
from prism_om.stores import open_store
from prism_om.stores._schema import APPLICATION_ID, SCHEMA_VERSION, load_schema
from prism_om.stores.sqlite import SqliteStore, connect


def _create_elsewhere(path: Path) -> None:
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        for statement in load_schema().statements:
            other.execute(statement)
        other.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        other.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        other.execute("COMMIT")
    finally:
        other.close()


@pytest.fixture
def race_after_first_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "new.db"
    real = connect.fetch_first_row
    landed: list[bool] = []

    async def racing(conn: Any, sql: str, *args: Any) -> Any:
        row = await real(conn, sql, *args)
        if not landed:
            landed.append(True)
            _create_elsewhere(path)
        return row

    monkeypatch.setattr(connect, "fetch_first_row", racing)
    return path


async def test_a_writable_open_meets_the_store_another_process_just_made(
    race_after_first_read: Path,
) -> None:
    async with await SqliteStore.open(race_after_first_read) as store:
        entry = message_entry("s", "user", "hello")
        await store.append(entry)
        assert await store.entries("s") == [entry]


async def test_a_read_only_open_meets_the_store_another_process_just_made(
    race_after_first_read: Path,
) -> None:
    sqlite3.connect(race_after_first_read).close()  # an empty file, as a new store starts
    async with await open_store(f"sqlite:{race_after_first_read}", read_only=True) as store:
        assert await store.sessions() == []
