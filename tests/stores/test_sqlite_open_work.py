"""The work of opening a SQLite store, counted at the driver: connections, statements, threads.

The usual reopen (a file in WAL, stamped with this schema version) is checked in a few
statements on one read-only connection, its bounded reads (``leaf``, ``recent_messages``
of a few) need nothing more, and no thread starts until a read or write needs one. A new,
older, newer or busy file takes the full preparation (the WAL switch, the schema), and so
does a file changed before the first write. Connections and statements are counted by
``support.sql_work``, threads by ``threading.Thread.start``; no clock is read.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.sql_work import Traced, statements

from prism_om.entries import custom_entry, message_entry
from prism_om.errors import StoreError
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore

TS = "2026-01-01T00:00:00.000Z"
WAL_SWITCH = "journal_mode = WAL"
"""The full preparation's first write to the file: a reopen of a current file sends none."""


def messages(count: int) -> list[Any]:
    entries, parent = [], None
    for i in range(count):
        entry = message_entry(
            "s", "user", f"m{i}", parent_id=parent, entry_id=f"m{i}", timestamp=TS
        )
        entries.append(entry)
        parent = entry.id
    return entries


@pytest.fixture
async def path(tmp_path: Path) -> Path:
    location = tmp_path / "s.db"
    async with await SqliteStore.open(location) as store:
        await store.append_many(messages(30))
    return location


@pytest.fixture
def threads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The names of the threads started while the test runs."""
    started: list[str] = []
    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        started.append(self.name)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    yield started


async def open_traced(
    monkeypatch: pytest.MonkeyPatch, path: Path, **kwargs: Any
) -> tuple[SqliteStore, Traced, int]:
    """The store, its trace, and the statements its open ran."""
    with statements(monkeypatch) as traced, traced.counting() as run:
        store = await SqliteStore.open(path, **kwargs)
    return store, traced, run.count


async def test_a_reopen_and_its_first_reads_use_one_connection_and_no_thread(
    path: Path, monkeypatch: pytest.MonkeyPatch, threads: list[str]
) -> None:
    store, traced, opened = await open_traced(monkeypatch, path)
    with traced.counting() as leaf_run:
        assert await store.leaf("s") == "m29"
    with traced.counting() as recent_run:
        recent = await store.recent_messages("s", 20)
    await store.close()
    assert [m.id for m in recent] == [f"m{i}" for i in range(10, 30)]
    # Before: a path probe and a reader (two connections, one thread), five statements on
    # open (busy_timeout, query_only, a pragma per schema mark).
    assert traced.connections == 1 and traced.targets[0].endswith("?mode=ro"), traced.targets
    assert threads == []
    assert opened == 3  # journal_mode, user_version and application_id
    assert leaf_run.count == 1
    # The leaf's position and its segment's last 20 messages: enough, so the branch's
    # pieces are not read.
    assert recent_run.count <= 2, recent_run.statements
    assert traced.open_connections == 0


async def test_a_current_file_reopens_without_the_schema_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    with statements(monkeypatch) as traced, traced.counting() as created:
        store = await SqliteStore.open(path)
    async with store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    assert created.matching(WAL_SWITCH) == 1  # a new file is prepared
    for synchronous, level in (("FULL", 2), ("NORMAL", 1), ("EXTRA", 3)):
        with traced.counting() as run:
            async with await SqliteStore.open(path, synchronous=synchronous) as store:
                settings = await store.connection_settings()
                assert settings["journal_mode"] == "wal"
                assert settings["synchronous"] == level
                assert settings["busy_timeout"] == 5000
                assert await store.leaf("s") == "a"
        assert run.matching(WAL_SWITCH) == 0, run.everything


async def test_a_file_of_another_shape_still_gets_the_full_preparation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    with statements(monkeypatch) as traced, traced.counting() as run:
        async with await SqliteStore.open(path) as store:
            assert (await store.connection_settings())["journal_mode"] == "wal"
            assert await store.leaf("s") == "a"
    assert run.matching(WAL_SWITCH) == 1


async def test_the_writer_opens_at_the_first_write(
    path: Path, monkeypatch: pytest.MonkeyPatch, threads: list[str]
) -> None:
    store, traced, _ = await open_traced(monkeypatch, path)
    async with store:
        assert await store.leaf("s") == "m29"
        assert traced.connections == 1  # the read-only one alone (no probe, no reader)
        await store.append(
            message_entry("s", "user", "new", parent_id="m29", entry_id="n", timestamp=TS)
        )
        assert traced.connections == 2 and len(threads) == 1  # the writer, and its thread
        assert await store.leaf("s") == "n"
        assert (await store.recent_messages("s", 1))[0].id == "n"
        settings = await store.connection_settings()
        assert settings["journal_mode"] == "wal" and settings["synchronous"] == 1


async def test_the_first_unbounded_read_starts_one_reader_and_close_joins_it(
    path: Path, monkeypatch: pytest.MonkeyPatch, threads: list[str]
) -> None:
    store, traced, _ = await open_traced(monkeypatch, path)
    assert threads == []
    branches = await asyncio.gather(*(store.entries("s") for _ in range(3)))
    assert [len(b) for b in branches] == [30, 30, 30]
    assert len(threads) == 1  # one reader for the three reads
    (thread,) = (t for t in threading.enumerate() if t.name == threads[0])
    await store.close()
    thread.join(timeout=5)
    assert not thread.is_alive()
    assert traced.open_connections == 0


async def test_another_writer_after_the_open_is_seen(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        assert await store.leaf("s") == "m29"
        async with await SqliteStore.open(path) as other:
            await other.append(
                message_entry("s", "user", "x", parent_id="m29", entry_id="x", timestamp=TS)
            )
        assert await store.leaf("s") == "x"
        assert [m.id for m in await store.recent_messages("s", 2)] == ["m29", "x"]


async def test_a_busy_answer_to_the_check_takes_the_full_open(
    path: Path, monkeypatch: pytest.MonkeyPatch, threads: list[str]
) -> None:
    with statements(monkeypatch) as traced:
        traced.fail_next(sqlite3.OperationalError("database is locked"))
        async with await SqliteStore.open(path) as store:
            assert traced.failures_left == 0
            assert len(threads) == 1  # the reader, opened and checked at once
            assert await store.leaf("s") == "m29"
            assert len(await store.recent_messages("s", 20)) == 20


async def test_a_newer_file_still_fails_closed(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(StoreError, match="newer than version"):
        await SqliteStore.open(path)


async def test_recent_messages_over_many_pieces_stay_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fork at every step: the branch is many pieces, and only the root is a message,
    # so finding the last messages reads every piece.
    entries: list[Any] = [message_entry("s", "user", "root", entry_id="r", timestamp=TS)]
    parent = "r"
    for i in range(12):
        for name in (f"x{i}", f"y{i}"):
            entries.append(
                custom_entry("s", {"type": "note", "n": i}, parent_id=parent, entry_id=name)
            )
        parent = f"y{i}"  # the second child: each step is a new piece
    memory = MemoryStore()
    await memory.append_many(entries)
    store, traced, _ = await open_traced(monkeypatch, tmp_path / "f.db")
    async with store:
        await store.append_many(entries)
        await store.checkout("s", "y11")
        with traced.counting() as long:
            got = await store.recent_messages("s", 20)
        with traced.counting() as short:
            few = await store.recent_messages("s", 20, "y1")
        await memory.checkout("s", "y11")
        assert got == await memory.recent_messages("s", 20) and [m.id for m in got] == ["r"]
        assert few == got
        # Measured: a statement per piece walked back through (13 here), after a bounded
        # first try (about ten) that gave up; the short branch (three pieces) costs a few.
        # A read that walked entry by entry, or gave up later, would cost more.
        assert long.count <= 13 + 11, long.statements
        assert short.count <= 6, short.statements


async def test_many_recent_messages_stay_bounded(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, traced, _ = await open_traced(monkeypatch, path)
    async with store:
        await store.entries("s")  # the reader opened (two setup pragmas), not counted below
        with traced.counting() as many:
            assert len(await store.recent_messages("s", 1000)) == 30
        with traced.counting() as few:
            assert len(await store.recent_messages("s", 20)) == 20
        assert many.count <= 3 and few.count <= 2, (many.statements, few.statements)
        assert many.rows <= 30 + 3 and few.rows <= 20 + 3


async def test_a_reader_that_fails_to_open_is_reported_and_opened_again(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, traced, _ = await open_traced(monkeypatch, path)
    async with store:
        # A new aiosqlite connection's first statement (its busy timeout) fails: the reader,
        # the first connection opened after a lazy open.
        traced.fail_next(sqlite3.OperationalError("disk I/O error"), matching="busy_timeout")
        with pytest.raises(StoreError):
            await store.entries("s")
        assert traced.failures_left == 0
        # A fresh reader, opened by the next read that needs it.
        assert len(await store.entries("s")) == 30


async def test_a_file_changed_before_the_first_write_is_prepared_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    store, traced, _ = await open_traced(monkeypatch, path)
    async with store:
        assert await store.leaf("s") == "a"
        # Private hooks kept: the journal mode changes only with no other connection on the
        # file, and a public call that closes the store's read connections is close().
        await store._reader.close()
        store._point.close()
        raw = sqlite3.connect(path)
        assert raw.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
        raw.close()
        with traced.counting() as run:
            await store.append(
                message_entry("s", "user", "yo", parent_id="a", entry_id="b", timestamp=TS)
            )
        assert run.matching(WAL_SWITCH) == 1
        assert (await store.connection_settings())["journal_mode"] == "wal"
