"""A read-only open of a store of an older schema version refuses it, unchanged, and says
how to migrate it (issue 29 step 4): the reads know only the current shape. The first
writable open migrates it, and the migrated copy of every committed fixture answers what
the fixture's own rows say."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from support.cli import failed, run_cli
from support.old_stores import copy_of, digest, fixture, reference_store, version_of

from prism_om.errors import StoreError, StoreVersionError
from prism_om.stores import open_store
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.conformance import snapshot

OLDER = range(1, SCHEMA_VERSION)


def test_every_older_version_has_a_committed_fixture() -> None:
    # Each released version keeps a fixture, so its migration stays tested.
    for version in OLDER:
        assert version_of(fixture(version)) == version


def files_of(directory: Path) -> dict[str, str]:
    return {name: digest(directory / name) for name in sorted(os.listdir(directory))}


@pytest.mark.parametrize("version", OLDER)
async def test_a_read_only_open_of_an_older_file_refuses_and_leaves_it(
    tmp_path: Path, version: int
) -> None:
    path = copy_of(version, tmp_path)
    before = files_of(tmp_path)
    for opens in (
        lambda: SqliteStore.open(path, read_only=True),
        lambda: open_store(f"sqlite:{path}", read_only=True),
    ):
        with pytest.raises(StoreVersionError) as caught:
            await opens()
        error = caught.value
        assert (error.version, error.supported) == (version, SCHEMA_VERSION)
        assert error.url == f"sqlite:{path}"
        message = str(error)
        assert str(path) in message
        assert f"schema version {version}, older than version {SCHEMA_VERSION}" in message
        assert "open it once for writing" in message and "without read_only=True" in message
    # Byte for byte: no WAL, no -shm, no header change.
    assert files_of(tmp_path) == before


@pytest.mark.parametrize("version", OLDER)
async def test_the_first_writable_open_migrates_to_what_the_rows_say(
    tmp_path: Path, version: int
) -> None:
    path = copy_of(version, tmp_path)
    reference = await reference_store(path)
    try:
        expected = await snapshot(reference)
        async with await SqliteStore.open(path) as store:
            assert version_of(path) == SCHEMA_VERSION
            assert await snapshot(store) == expected
            for sid in await reference.sessions():
                for leaf in await reference.leaves(sid):
                    assert await store.ledger(sid, leaf) == await reference.ledger(sid, leaf)
                    live = await store.live_ledger(sid, leaf)
                    assert live == await reference.live_ledger(sid, leaf)
    finally:
        await reference.close()
    # Migrated, the file opens read-only.
    async with await SqliteStore.open(path, read_only=True) as reader:
        assert await snapshot(reader) == expected


async def test_a_newer_file_is_a_version_error_too(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    async with await SqliteStore.open(path):
        pass
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    for options in ({}, {"read_only": True}):
        with pytest.raises(StoreVersionError, match="upgrade prism-om") as caught:
            await SqliteStore.open(path, **options)
        assert (caught.value.version, caught.value.supported) == (
            SCHEMA_VERSION + 1,
            SCHEMA_VERSION,
        )
        assert isinstance(caught.value, StoreError)


def test_a_reading_command_refuses_an_older_file_and_names_the_way(tmp_path: Path) -> None:
    path = copy_of(1, tmp_path)
    before = files_of(tmp_path)
    for command in (["sessions"], ["view", "--session", "om-a"], ["status", "--session", "om-a"]):
        line = failed(run_cli(*command, "--db", str(path), cwd=tmp_path), 1)
        assert str(path) in line and "schema version 1" in line and "open it once" in line
    assert files_of(tmp_path) == before
