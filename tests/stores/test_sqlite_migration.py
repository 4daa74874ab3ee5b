"""Schema migrations (issue 13 item 20) on a committed store of schema version 1, and the
per-session summary table they backfill (item 17)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import aiosqlite
import pytest
from support.old_stores import reference_store

from prism_om.entries import message_entry
from prism_om.errors import StoreError, StoreVersionError
from prism_om.stores._schema import SCHEMA_VERSION
from prism_om.stores.base import SessionSummary
from prism_om.stores.sqlite import MIGRATIONS, SqliteStore
from prism_om.testing.conformance import snapshot

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "sqlite" / "store-v1.db"


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


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dump(path: Path) -> list[str]:
    """Every table's schema and rows (the journal mode in the header aside)."""
    with sqlite3.connect(path) as conn:
        lines = list(conn.iterdump())
    conn.close()
    return lines


def as_time(stamp: str) -> datetime:
    parsed = datetime.fromisoformat(stamp)
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


async def summaries_from_entries(store: SqliteStore) -> list[SessionSummary]:
    """What the entries themselves say, read the slow way, independent of the table."""
    out = []
    for sid in await store.sessions():
        listed = await store.list(sid)
        latest = max(listed, key=lambda e: as_time(e.timestamp))
        out.append(
            SessionSummary(
                sid,
                len(listed),
                sum(1 for e in listed if e.kind == "message"),
                len(await store.leaves(sid)),
                as_time(latest.timestamp).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z",
            )
        )
    return out


@pytest.fixture
def old_store(tmp_path: Path) -> Path:
    path = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, path)
    assert version_of(path) == 1
    return path


def test_the_fixture_is_version_one() -> None:
    assert version_of(FIXTURE) == 1
    assert "session_summary" not in tables_of(FIXTURE)


async def test_opening_a_version_one_store_migrates_and_backfills(old_store: Path) -> None:
    # What the fixture's own rows hold (support/old_stores.py).
    async with await reference_store(old_store) as before:
        seen_before = await snapshot(before)
    async with await SqliteStore.open(old_store) as store:
        assert version_of(old_store) == SCHEMA_VERSION
        # Everything the file held before the migration reads back unchanged.
        assert await snapshot(store) == seen_before
        summaries = await store.session_summaries()
        assert summaries == await summaries_from_entries(store)
        by_id = {s.session_id: s for s in summaries}
        # "20260318 101010" sorts after "2026-03-22..." as text; as a time it is earlier.
        assert by_id["mixed-times"].last_activity == "2026-03-22T09:30:00.000Z"
        assert by_id["mixed-times"].leaves == 2
        assert [s.session_id for s in summaries] == ["om-a", "om-b", "mixed-times"]


async def test_appends_after_the_migration_keep_the_summaries(old_store: Path) -> None:
    async with await SqliteStore.open(old_store) as store:
        leaf = await store.leaf("mixed-times")
        # A fork off an inner entry adds a leaf; a later timestamp moves last activity.
        await store.append(
            message_entry(
                "mixed-times",
                "user",
                "late",
                parent_id="mixed.0",
                entry_id="mixed.late",
                timestamp="2026-04-01T00:00:00+05:00",
            )
        )
        await store.append(
            message_entry(
                "mixed-times",
                "user",
                "old",
                parent_id=leaf,
                entry_id="mixed.old",
                timestamp="19990101 000000",
            )
        )
        summaries = await store.session_summaries()
        assert summaries == await summaries_from_entries(store)
        mixed = {s.session_id: s for s in summaries}["mixed-times"]
        assert (mixed.entries, mixed.leaves) == (7, 3)
        assert mixed.last_activity == "2026-03-31T19:00:00.000Z"


async def test_a_failed_migration_leaves_the_old_version(
    old_store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = MIGRATIONS[1]
    before = dump(old_store)

    async def fails_half_way(conn: aiosqlite.Connection) -> None:
        await real(conn)  # the table exists and is filled when the failure comes
        raise RuntimeError("power cut mid-migration")

    steps: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {
        **MIGRATIONS,
        1: fails_half_way,
    }
    monkeypatch.setattr("prism_om.stores.sqlite.connect.MIGRATIONS", steps)
    with pytest.raises(RuntimeError, match="power cut"):
        await SqliteStore.open(old_store)
    assert version_of(old_store) == 1
    assert "session_summary" not in tables_of(old_store)
    assert dump(old_store) == before
    monkeypatch.setattr("prism_om.stores.sqlite.connect.MIGRATIONS", {**MIGRATIONS, 1: real})
    async with await SqliteStore.open(old_store) as store:
        assert await store.session_summaries() == await summaries_from_entries(store)


async def test_a_read_only_open_does_not_migrate(old_store: Path) -> None:
    before = digest(old_store)
    with pytest.raises(StoreVersionError, match="schema version 1, older"):
        await SqliteStore.open(old_store, read_only=True)
    assert version_of(old_store) == 1
    assert digest(old_store) == before


async def test_a_newer_store_is_refused_naming_both_versions(old_store: Path) -> None:
    with sqlite3.connect(old_store) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 3}")
    conn.close()
    for options in ({}, {"read_only": True}):
        with pytest.raises(StoreError, match=rf"version {SCHEMA_VERSION + 3}.*{SCHEMA_VERSION}"):
            await SqliteStore.open(old_store, **options)
    assert version_of(old_store) == SCHEMA_VERSION + 3


async def test_two_openers_migrate_once(old_store: Path) -> None:
    # The second opener finds the file migrated once it holds the write lock.
    first = await SqliteStore.open(old_store)
    try:
        async with await SqliteStore.open(old_store) as second:
            assert await second.session_summaries() == await first.session_summaries()
    finally:
        await first.close()
    with sqlite3.connect(old_store) as conn:
        assert conn.execute("SELECT count(*) FROM session_summary").fetchone()[0] == 3
    conn.close()
