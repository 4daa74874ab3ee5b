"""Reopening a store file that is already current skips the schema work.

A file in WAL mode, stamped with this schema version and our application id needs only
its connection settings: they are checked and set in the hop that opens the connection,
and the full preparation (WAL switch, schema apply, migrations) is not run.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import message_entry
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite import store as store_module

TS = "2026-01-01T00:00:00.000Z"


def prepare_calls(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = store_module.prepare_file

    async def counting(url: str, *args: Any, **kwargs: Any) -> None:
        calls.append(url)
        await real(url, *args, **kwargs)

    monkeypatch.setattr(store_module, "prepare_file", counting)
    return calls


async def test_a_current_file_opens_without_the_schema_work(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    calls = prepare_calls(monkeypatch)
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    assert len(calls) == 1  # a new file is prepared
    for synchronous, level in (("FULL", 2), ("NORMAL", 1), ("EXTRA", 3)):
        async with await SqliteStore.open(path, synchronous=synchronous) as store:
            settings = await store.connection_settings()
            assert settings["journal_mode"] == "wal"
            assert settings["synchronous"] == level
            assert settings["busy_timeout"] == 5000
            assert await store.leaf("s") == "a"
    assert len(calls) == 1


async def test_a_file_of_another_shape_still_gets_the_full_preparation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA journal_mode = DELETE")
    raw.close()
    calls = prepare_calls(monkeypatch)
    async with await SqliteStore.open(path) as store:
        assert (await store.connection_settings())["journal_mode"] == "wal"
        assert await store.leaf("s") == "a"
    assert len(calls) == 1


def counted_connects(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from prism_om.stores.sqlite import connect as connect_module

    opened: list[str] = []
    real = sqlite3.connect

    def counting(target: str, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(str(target))
        return real(target, *args, **kwargs)

    monkeypatch.setattr(connect_module.sqlite3, "connect", counting)
    return opened


async def test_reopening_for_reads_leaves_the_writer_for_the_first_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    opened = counted_connects(monkeypatch)
    async with await SqliteStore.open(path) as store:
        assert await store.leaf("s") == "a"
        assert len(opened) == 1  # the loop's read-only connection alone (no probe, no reader)
        await store.append(
            message_entry("s", "user", "yo", parent_id="a", entry_id="b", timestamp=TS)
        )
        assert len(opened) == 2  # the writer, at the first write
        assert await store.leaf("s") == "b"
        assert (await store.connection_settings())["synchronous"] == 1


async def test_a_file_changed_before_the_first_write_is_prepared_then(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "s.db"
    async with await SqliteStore.open(path) as store:
        await store.append(message_entry("s", "user", "hi", entry_id="a", timestamp=TS))
    async with await SqliteStore.open(path) as store:
        calls = prepare_calls(monkeypatch)
        assert await store.leaf("s") == "a"
        await store._reader.close()  # let another connection change the journal mode
        store._point.close()  # (the loop's read-only connection, too)
        raw = sqlite3.connect(path)
        assert raw.execute("PRAGMA journal_mode = DELETE").fetchone()[0] == "delete"
        raw.close()
        await store.append(
            message_entry("s", "user", "yo", parent_id="a", entry_id="b", timestamp=TS)
        )
        assert calls == [store.url]
        assert (await store.connection_settings())["journal_mode"] == "wal"
