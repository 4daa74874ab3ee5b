"""``delete_session`` per adapter: the erased text is gone from the files, the rest intact.

The rules every adapter shares are in ``prism_om.testing.delete_conformance``; here is what
only one adapter can show: SQLite's bytes (secure_delete, WAL checkpoint) and integrity
check, JSONL's files and a second process's view, PostgreSQL's tables.
"""

from __future__ import annotations

import random
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support.sql_work import statements

from prism_om.errors import ReadOnlyStoreError
from prism_om.stores import SessionStore, open_store
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.postgres import split_postgres_url
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.om_factories import BranchBuilder

ERASED = "ERASE-ME-q7z3"
KEPT = "KEEP-ME-w9x1"
# Every table keyed by the entry that recorded its rows, read from the schema itself so
# that a fold table added later cannot be forgotten by delete_session unnoticed.
SCHEMA = (Path(__file__).resolve().parents[2] / "schema.sql").read_text()
FOLD_TABLES = tuple(
    sorted(
        match.group(1)
        for match in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+) \(([^;]*)\);", SCHEMA)
        if re.search(r"^\s*entry_seq\b", match.group(2), re.MULTILINE)
    )
)


def _session(session_id: str, marker: str, seed: int) -> list:  # type: ignore[type-arg]
    """A session whose messages, observations and reflections all carry ``marker``;
    some messages are longer than a SQLite page, so overflow pages hold text too."""
    builder = BranchBuilder(session_id=session_id, rng=random.Random(seed), secrets=[marker])
    for n in range(60):
        size = 6000 if n % 15 == 0 else 40
        builder.message("user" if n % 2 == 0 else "assistant", f"{marker} " * size)
        if n % 10 == 9:
            builder.observe(2, text=f"the user said {marker}")
        if n % 20 == 19:
            builder.reflect(1)
        if n == 30:
            builder.fork()
    builder.run(["user", "observe", "drop", "scope", "compact", "assistant"])
    # Two reflections more and one consolidating them: om_supersessions rows to erase.
    builder.run(["reflect", "reflect", "supersede"])
    return builder.entries


async def _fill(store: SessionStore) -> None:
    for sid, marker, seed in (("kept-a", KEPT, 1), ("gone", ERASED, 2), ("kept-b", KEPT, 3)):
        for entry in _session(sid, marker, seed):
            await store.append(entry)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir()}


def _file_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in (db, Path(f"{db}-wal")) if p.exists())


async def test_sqlite_delete_leaves_no_text_in_the_file_or_wal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store.db"
    with statements(monkeypatch) as traced:
        connect = sqlite3.connect

        def default_off(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            # As in a build whose default is off (this one's may be on): the delete
            # turns it on.
            raw: sqlite3.Connection = connect(*args, **kwargs)
            raw.execute("PRAGMA secure_delete = OFF")
            return raw

        monkeypatch.setattr(sqlite3, "connect", default_off)
        store = await SqliteStore.open(db)
    async with store:
        await _fill(store)
        assert ERASED.encode() in _file_bytes(db)
        with traced.counting() as run:
            await store.delete_session("gone")
        # Checked with the store still open: the WAL is where a delete lands first.
        data = _file_bytes(db)
        assert ERASED.encode() not in data
        assert KEPT.encode() in data
        assert b"gone" not in data  # not even the ids or the session's row
        assert await store.sessions() == ["kept-a", "kept-b"]
        # secure_delete is set back to what the connection had (appends need not pay
        # for it): the last setting the delete made is the default, off.
        settings = [sql for sql in run.everything if "secure_delete =" in sql]
        assert settings and settings[-1].replace(" ", "").upper().endswith("=0"), settings
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        for table in FOLD_TABLES:
            orphans = conn.execute(
                f"SELECT count(*) FROM {table} WHERE entry_seq NOT IN (SELECT seq FROM entries)"
            ).fetchone()
            assert orphans == (0,), table
        for table in ("segments", "session_summary", "sessions", "entries"):
            left = conn.execute(f"SELECT count(*) FROM {table} WHERE session_id = 'gone'")
            assert left.fetchone() == (0,), table
    conn.close()


async def test_sqlite_without_secure_delete_the_text_would_stay(tmp_path: Path) -> None:
    """The control for the test above: a plain DELETE leaves the bytes in the file."""
    db = tmp_path / "store.db"
    async with await SqliteStore.open(db) as store:
        await _fill(store)
    with sqlite3.connect(db, isolation_level=None) as conn:
        conn.execute("PRAGMA secure_delete = OFF")
        conn.execute("DELETE FROM entries WHERE session_id = 'gone'")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    assert ERASED.encode() in _file_bytes(db)


async def test_sqlite_read_only_store_refuses_delete(tmp_path: Path) -> None:
    db = tmp_path / "store.db"
    async with await SqliteStore.open(db) as store:
        await _fill(store)
    async with await open_store(f"sqlite:{db}", read_only=True) as store:
        with pytest.raises(ReadOnlyStoreError):
            await store.delete_session("gone")
        assert "gone" in await store.sessions()


async def test_jsonl_delete_removes_the_file_and_its_sidecars(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path) as store:
        await _fill(store)
        (tmp_path / ".gone.leaf.json.tmp").write_text("{}")  # a sidecar left mid-replace
        other = await JsonlStore.open(tmp_path)  # another process's view, loaded first
        assert len(await other.list("gone")) > 0
        await store.delete_session("gone")
        names = sorted(_files(tmp_path))
        assert not [n for n in names if n.startswith(("gone.", ".gone."))], names
        assert "kept-a.jsonl" in names and "kept-b.leaf.json" in names
        assert not any(ERASED.encode() in data for data in _files(tmp_path).values())
        # The other view drops the session at its next read, as erased, not damaged.
        assert await other.list("gone") == []
        assert await other.sessions() == ["kept-a", "kept-b"]
        assert [c for c in await other.check() if c.problem] == []
        await other.close()
        assert [c for c in await store.check() if c.problem] == []


async def test_jsonl_a_delete_killed_between_its_unlinks_is_finished(tmp_path: Path) -> None:
    """What an older version's deleter, killed between its two unlinks, left: no public
    call of this version leaves it (test_jsonl_delete_protocol kills this one's)."""
    async with await JsonlStore.open(tmp_path) as store:
        await _fill(store)
        # The pending record an older deleter wrote first, written by the store's own
        # writer of it: the on-disk state is the fixture, and this writes it exactly.
        store._bump_counter(pending="gone")
        (tmp_path / "gone.jsonl").unlink()  # ...then it died after the first unlink
    async with await JsonlStore.open(tmp_path) as store:
        await store.append(_session("fresh", KEPT, 4)[0])  # the next writer clears debris
        assert not (tmp_path / "gone.leaf.json").exists()
        assert await store.sessions() == ["kept-a", "kept-b", "fresh"]
        assert [c for c in await store.check() if c.problem] == []


async def test_postgres_delete_leaves_no_rows(postgres_url: str) -> None:
    async with await open_store(postgres_url) as store:
        await _fill(store)
        await store.delete_session("gone")
        assert await store.sessions() == ["kept-a", "kept-b"]
    import psycopg

    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, options=f"-c search_path={schema}") as conn:
        for table in (*FOLD_TABLES, "entries"):
            kept = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
            assert kept is not None and kept[0] > 0, table  # the kept sessions' rows
        for table in FOLD_TABLES:
            row = conn.execute(
                f"SELECT count(*) FROM {table} WHERE entry_seq NOT IN (SELECT seq FROM entries)"
            ).fetchone()
            assert row == (0,), table
        for table in ("segments", "session_summary", "sessions", "entries"):
            row = conn.execute(
                f"SELECT count(*) FROM {table} WHERE session_id = %s", ("gone",)
            ).fetchone()
            assert row == (0,), table
