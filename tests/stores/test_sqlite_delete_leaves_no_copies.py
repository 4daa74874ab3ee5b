"""SQLite ``delete_session`` leaves no copy of the erased text in any file of the store,
whatever the library's ``secure_delete`` default and whatever wrote the file before.

Every connection here is opened with ``secure_delete`` off before anything is written, as
python.org's builds have it (SQLite's own default; Debian's build turns it on). Cells
that page balancing, updates and a migration's rewrite leave in a page's free space are
then plain bytes in the file, which the delete's own ``secure_delete`` never reaches: the
files are scanned raw (database, ``-wal``, ``-shm``, any journal) for the erased session.
"""

from __future__ import annotations

import random
import shutil
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from prism_om.core.search_text import term_key, text_terms
from prism_om.entries import SessionEntry
from prism_om.errors import StoreError
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite.worker_thread import ThreadWorkConnection
from prism_om.testing.om_factories import BranchBuilder

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "sqlite"
ERASED = "ERASED-x5k2p"
GONE = "gone-q7z3"
KEPT = "KEPT-m3v8r"


class _FailingVacuum(ThreadWorkConnection):
    """A connection whose ``VACUUM`` meets a full disk, as SQLite reports one (and runs
    the adapter's thread work, as the connections it replaces do)."""

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if isinstance(sql, str) and sql.strip().upper() == "VACUUM":
            error = sqlite3.OperationalError("database or disk is full")
            error.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
            raise error
        return super().execute(sql, *args)


def _forcing_secure_delete_off(
    monkeypatch: pytest.MonkeyPatch, factory: type[sqlite3.Connection] = sqlite3.Connection
) -> list[str]:
    """Every connection opened from now on starts with ``secure_delete`` off, as in a build
    whose default it is; the answer fills with the ``secure_delete`` pragmas they run
    (traced at the driver: which connection runs them is the store's business)."""
    opened = sqlite3.connect
    pragmas: list[str] = []

    def trace(sql: str) -> None:
        if "secure_delete" in sql:
            pragmas.append(" ".join(sql.split()))

    def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        if factory is not sqlite3.Connection:
            kwargs["factory"] = factory
        conn = opened(*args, **kwargs)
        conn.set_trace_callback(trace)
        conn.execute("PRAGMA secure_delete = OFF")
        return conn

    monkeypatch.setattr(sqlite3, "connect", connect)
    return pragmas


@pytest.fixture
def secure_delete_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    yield _forcing_secure_delete_off(monkeypatch)


def _session(session_id: str, marker: str, seed: int) -> list[SessionEntry]:
    """Messages and memory records carrying ``marker``, a fork, and one entry of many
    pages (overflow pages hold its text)."""
    builder = BranchBuilder(session_id=session_id, rng=random.Random(seed), secrets=[marker])
    for n in range(150):
        size = 12_000 if n == 70 else 3 + n % 40
        builder.message("user" if n % 2 == 0 else "assistant", f"{marker} {n} " * size)
        if n % 25 == 24:
            builder.observe(2, text=f"the user said {marker} at {n}")
        if n == 90:
            builder.fork()
    builder.run(["reflect", "drop", "scope", "compact", "assistant"])
    return builder.entries


def _index_key_bytes(word: str) -> bytes:
    """How a ``search_blocks`` row holds the key of ``word``'s term in the file: a record's
    integer, big-endian in the fewest of 1, 2, 3 or 4 bytes (SQLite's serial types)."""
    (term,) = text_terms(word)
    key = term_key(term)
    width = next(w for w in (1, 2, 3, 4) if key < 1 << (8 * w - 1))
    return struct.pack(">I", key)[4 - width :]


# The index's copy of the erased text: the key of its marker's one unstemmed term.
ERASED_KEY = _index_key_bytes(ERASED.split("-")[1])


def _store_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _holding(directory: Path, needles: list[bytes]) -> dict[str, int]:
    """Files of the store holding any of ``needles``, with how many copies."""
    found = {}
    for name, data in _store_files(directory).items():
        copies = sum(data.count(needle) for needle in needles)
        if copies:
            found[name] = copies
    return found


def _left_on(pragmas: list[str]) -> bool:
    """Whether the last ``secure_delete`` a connection was set to is on (the delete sets
    it on and back; a store that left it on would make every later write pay for it)."""
    sets = [p.rsplit("=", 1)[1].strip().upper() for p in pragmas if "=" in p]
    return bool(sets) and sets[-1] not in ("0", "OFF", "FALSE")


async def _fill_interleaved(store: SqliteStore) -> None:
    """The erased session's entries appended one at a time, between two other sessions'
    (so their rows share pages, which split and rebalance as they grow)."""
    sessions = [
        _session("kept-a", KEPT, 1),
        _session(GONE, ERASED, 2),
        _session("kept-b", KEPT, 3),
    ]
    for row in range(max(len(s) for s in sessions)):
        for entries in sessions:
            if row < len(entries):
                await store.append(entries[row])


async def test_delete_leaves_no_copy_in_any_file_with_secure_delete_off(
    tmp_path: Path, secure_delete_off: list[str]
) -> None:
    db = tmp_path / "store.db"
    needles = [ERASED.encode(), GONE.encode()]
    async with await SqliteStore.open(db) as store:
        await _fill_interleaved(store)
        assert secure_delete_off and not _left_on(secure_delete_off)  # the emulated default
        kept = {sid: await store.list(sid) for sid in ("kept-a", "kept-b")}
        assert _holding(tmp_path, needles)
        # The first search indexes the session's messages; the index then holds the
        # marker's term key once per row of packed postings (a kind and 256 depths of a
        # segment), in the file or its WAL.
        assert [h.id for h in await store.search(GONE, ERASED, limit=3)]
        assert sum(_holding(tmp_path, [ERASED_KEY]).values()) >= 10
        assert await store.delete_session(GONE) > 150
        # With the store still open: the WAL and -shm are where a delete lands first.
        assert _holding(tmp_path, needles) == {}
        assert _holding(tmp_path, [ERASED_KEY]) == {}, "the index kept the erased terms"
        assert await store.search(GONE, ERASED) == []
        assert store.wal_frames_pending == 0
        assert await store.sessions() == ["kept-a", "kept-b"]
        for sid, entries in kept.items():
            assert await store.list(sid) == entries
        assert "PRAGMA secure_delete = ON" in secure_delete_off  # the delete paid for it
        assert not _left_on(secure_delete_off)  # appends still do not
        await store.append(_session("after", KEPT, 4)[0])
    assert _holding(tmp_path, needles) == {}
    assert KEPT.encode() in _store_files(tmp_path)["store.db"]
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()


def _sessions_of(db: Path) -> list[str]:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT session_id FROM sessions ORDER BY seq").fetchall()
    conn.close()
    return [sid for (sid,) in rows]


def _traces_of(db: Path, session_id: str) -> list[bytes]:
    """What names the session's rows in an older fixture: its entry ids, and the
    ``sessionId`` of the wire JSON bodies held up to schema version 3."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        ids = conn.execute("SELECT id FROM entries WHERE session_id = ?", (session_id,))
        traces = [entry_id.encode() for (entry_id,) in ids]
    conn.close()
    return [*traces, f'"sessionId":"{session_id}"'.encode()]


FIXTURE_SESSIONS = [
    (version, sid)
    for version in (1, 2, 3, 4)
    for sid in _sessions_of(FIXTURES / f"store-v{version}.db")
]


@pytest.mark.parametrize(("version", "session_id"), FIXTURE_SESSIONS)
async def test_delete_after_a_migration_leaves_no_copy_of_the_rewritten_rows(
    tmp_path: Path, secure_delete_off: list[str], version: int, session_id: str
) -> None:
    db = tmp_path / "store.db"
    shutil.copy(FIXTURES / f"store-v{version}.db", db)
    traces = _traces_of(db, session_id)
    kept = [sid for sid in _sessions_of(db) if sid != session_id]
    async with await SqliteStore.open(db) as store:
        before = {sid: await store.list(sid) for sid in kept}
        # Migrated on open (the body rewrite of version 4 left the old cells behind).
        assert await store.delete_session(session_id) > 0
        assert _holding(tmp_path, traces) == {}
        assert store.wal_frames_pending == 0
        assert {sid: await store.list(sid) for sid in kept} == before
    assert _holding(tmp_path, traces) == {}


async def test_a_failed_vacuum_says_the_session_is_deleted_but_its_text_may_stay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store.db"
    async with await SqliteStore.open(db) as store:
        await _fill_interleaved(store)
    _forcing_secure_delete_off(monkeypatch, _FailingVacuum)
    async with await SqliteStore.open(db) as store:
        with pytest.raises(StoreError) as raised:
            await store.delete_session(GONE)
        message = str(raised.value)
        assert f"deleted session {GONE!r}" in message
        assert "the VACUUM that rewrites the file failed" in message
        assert "database or disk is full" in message and str(db) in message
        assert raised.value.session_id == GONE and raised.value.url == store.url
        assert not isinstance(raised.value.__cause__, sqlite3.Error)
        # The delete itself committed, and the WAL was still checkpointed.
        assert await store.sessions() == ["kept-a", "kept-b"]
        assert store.wal_frames_pending == 0
        assert (tmp_path / "store.db-wal").stat().st_size == 0
        # The next write is not refused: a full disk is no damage.
        await store.append(_session("after", KEPT, 4)[0])
