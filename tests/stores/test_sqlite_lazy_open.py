"""Reopening a current SQLite file starts no thread: the open path's work, counted.

The usual reopen (a file in WAL, stamped with this schema version) is checked in ONE
statement on the event loop's own read-only connection (``stores/sqlite/point``), and the
open path's bounded reads (``leaf``, ``recent_messages`` of a few) run there too. The
aiosqlite reader and writer, each a thread, start on the first read or write that needs
them. Everything else (a new, older, newer or busy file) takes the full open, unchanged.
No clock is read here: connections, threads, statements and hops are counted.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from prism_om.entries import custom_entry, message_entry
from prism_om.errors import StoreError
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite import loop_reads as point_module

TS = "2026-01-01T00:00:00.000Z"


@contextmanager
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """Connections opened (each traced: its statements), threads started, aiosqlite hops."""
    seen: dict[str, list[Any]] = {"connects": [], "statements": [], "threads": [], "hops": []}
    real_connect = sqlite3.connect

    def connect(target: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        seen["connects"].append(str(target))
        raw = real_connect(target, *args, **kwargs)
        raw.set_trace_callback(seen["statements"].append)
        return raw

    real_start = threading.Thread.start

    def start(self: threading.Thread) -> None:
        seen["threads"].append(self.name)
        real_start(self)

    real_execute = aiosqlite.Connection._execute

    async def execute(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        seen["hops"].append(fn)
        return await real_execute(self, fn, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    monkeypatch.setattr(threading.Thread, "start", start)
    monkeypatch.setattr(aiosqlite.Connection, "_execute", execute)
    try:
        yield seen
    finally:
        monkeypatch.undo()


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


async def test_reopen_leaf_and_recent_start_no_thread_and_one_connection(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted(monkeypatch) as seen:
        store = await SqliteStore.open(path)
        opened = len(seen["statements"])
        assert await store.leaf("s") == "m29"
        leaf = len(seen["statements"]) - opened
        recent = await store.recent_messages("s", 20)
        await store.close()
    assert [m.id for m in recent] == [f"m{i}" for i in range(10, 30)]
    # Before: a path probe and the aiosqlite reader (two connections, one thread), five
    # statements on open (busy_timeout, query_only, a pragma per schema mark), and a hop
    # per read.
    assert len(seen["connects"]) == 1 and seen["connects"][0].endswith("?mode=ro")
    assert seen["threads"] == [] and seen["hops"] == []
    assert opened == 3  # journal_mode, user_version and application_id
    assert leaf == 1
    # The leaf's position and its segment's last 20 messages: enough, so the branch's
    # pieces are not read.
    assert len(seen["statements"]) == opened + leaf + 2


async def test_the_first_unbounded_read_starts_the_reader_once_and_close_joins_it(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted(monkeypatch) as seen:
        store = await SqliteStore.open(path)
        assert seen["threads"] == []
        branches = await asyncio.gather(*(store.entries("s") for _ in range(3)))
        assert [len(b) for b in branches] == [30, 30, 30]
        assert len(seen["threads"]) == 1  # one reader for the three reads
        (thread,) = (t for t in threading.enumerate() if t.name == seen["threads"][0])
        await store.close()
    thread.join(timeout=5)
    assert not thread.is_alive()


async def test_a_write_after_a_lazy_open_starts_the_writer_and_reads_see_it(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with counted(monkeypatch) as seen:
        async with await SqliteStore.open(path) as store:
            await store.append(
                message_entry("s", "user", "new", parent_id="m29", entry_id="n", timestamp=TS)
            )
            assert seen["threads"] and len(seen["threads"]) == 1  # the writer alone
            assert await store.leaf("s") == "n"
            assert (await store.recent_messages("s", 1))[0].id == "n"
            assert (await store.connection_settings())["journal_mode"] == "wal"


async def test_another_writer_after_the_open_is_seen_by_the_loop_reads(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        assert await store.leaf("s") == "m29"
        async with await SqliteStore.open(path) as other:
            await other.append(
                message_entry("s", "user", "x", parent_id="m29", entry_id="x", timestamp=TS)
            )
        assert await store.leaf("s") == "x"
        assert [m.id for m in await store.recent_messages("s", 2)] == ["m29", "x"]


async def test_a_busy_or_unreadable_check_takes_the_full_open(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: Any, sql: str, params: Any) -> list[Any]:
        raise point_module.NotAPoint

    monkeypatch.setattr(point_module.PointConnection, "fetch", refuse)
    with counted(monkeypatch) as seen:
        async with await SqliteStore.open(path) as store:
            assert len(seen["threads"]) == 1  # the reader, opened and checked at once
            assert await store.leaf("s") == "m29"
            assert len(await store.recent_messages("s", 20)) == 20


async def test_a_newer_file_still_fails_closed(path: Path) -> None:
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA user_version = 99")
    raw.close()
    with pytest.raises(StoreError, match="newer than version"):
        await SqliteStore.open(path)


async def test_recent_messages_past_the_statement_budget_takes_one_hop(
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
    async with await SqliteStore.open(tmp_path / "f.db") as store:
        await store.append_many(entries)
        await store.checkout("s", "y11")
        with counted(monkeypatch) as seen:
            got = await store.recent_messages("s", 20)
            few = await store.recent_messages("s", 20, "y1")
        await memory.checkout("s", "y11")
        assert got == await memory.recent_messages("s", 20) and [m.id for m in got] == ["r"]
        assert few == got
        # The long branch went over the budget and was redone in one hop; the short one
        # (three pieces) stayed on the loop.
        assert len(seen["hops"]) == 1


async def test_many_recent_messages_take_the_hop(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqliteStore.open(path) as store:
        with counted(monkeypatch) as seen:
            assert len(await store.recent_messages("s", 1000)) == 30
            assert len(await store.recent_messages("s", 20)) == 20
        assert len(seen["hops"]) == 1  # the thousand; the twenty is a point read


async def test_a_reader_that_fails_to_start_is_reported_and_retried(path: Path) -> None:
    async with await SqliteStore.open(path) as store:
        failed = store._start_reader
        assert failed is not None

        async def refuse() -> bool:
            raise StoreError("could not open the reader", url=store.url)

        store._start_reader = refuse
        with pytest.raises(StoreError, match="could not open the reader"):
            await store.entries("s")
        # A fresh reader, opened by the next read that needs it.
        assert len(await store.entries("s")) == 30
        assert store._start_reader is None
