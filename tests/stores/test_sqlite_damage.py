"""A SQLite store that meets damage refuses later writes (issue 13 item 4), and a write
past the file size limit says so (item 19)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from prism_om.core.records import OBSERVATIONS_RECORDED
from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import CorruptStoreError, StoreError
from prism_om.stores.sqlite import DAMAGED_SUFFIX, SqliteStore
from prism_om.testing.om_factories import random_builder

ROOT = Path(__file__).resolve().parents[2]


def zero_table_root(path: Path, table: str) -> None:
    """Overwrite the root page of ``table`` with zeros, as a disk fault would."""
    with sqlite3.connect(path) as conn:
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (root,) = conn.execute(
            "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
        ).fetchone()
    conn.close()
    with open(path, "r+b") as file:
        file.seek((root - 1) * page_size)
        file.write(bytes(page_size))


async def store_before_first_observation(path: Path) -> SessionEntry:
    """A closed store holding a session up to (not including) its first observation
    record, which is returned."""
    builder = random_builder(5, 60, session_id="om", forks=False)
    first = next(i for i, e in enumerate(builder.entries) if e.custom_type == OBSERVATIONS_RECORDED)
    async with await SqliteStore.open(path) as store:
        await store.append_many(builder.entries[:first])
    return builder.entries[first]


def names_in(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def other_message(entry_id: str = "other.1") -> SessionEntry:
    return message_entry("other", "user", "a new session", entry_id=entry_id)


async def test_a_write_that_meets_damage_refuses_later_writes(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    record = await store_before_first_observation(path)
    zero_table_root(path, "om_observations")
    async with await SqliteStore.open(path) as store:
        before = [e.id for e in await store.list("om")]
        with pytest.raises(CorruptStoreError, match=r"d\.db"):
            await store.append(record)
        # This write touches no damaged page; it is refused all the same.
        with pytest.raises(CorruptStoreError, match=r"d\.db is damaged.*prism-om check"):
            await store.append(other_message())
        with pytest.raises(CorruptStoreError, match="damaged"):
            await store.checkout("om", before[0])
        # Reads go on, and the refused writes left nothing behind.
        assert [e.id for e in await store.list("om")] == before
        assert await store.sessions() == ["om"]
        assert await store.leaf("om") == before[-1]
    assert (tmp_path / f"d.db{DAMAGED_SUFFIX}").exists()
    # Another opener (another process, a later command) refuses too, from the note.
    async with await SqliteStore.open(path) as again:
        with pytest.raises(CorruptStoreError, match="marked damaged by an earlier write"):
            await again.append(other_message("other.2"))
        assert await again.sessions() == ["om"]


async def test_a_read_that_meets_damage_also_stops_writes(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    await store_before_first_observation(path)
    zero_table_root(path, "entries")
    async with await SqliteStore.open(path) as store:
        with pytest.raises(CorruptStoreError):
            await store.list("om")
        with pytest.raises(CorruptStoreError, match="damaged"):
            await store.append(other_message())


async def test_healthy_store_has_no_damage_note(tmp_path: Path) -> None:
    path = tmp_path / "h.db"
    async with await SqliteStore.open(path) as store:
        await store.append(other_message())
    assert names_in(tmp_path) == ["h.db"]


FILE_LIMIT_WRITER = """
import asyncio, resource, sys
from prism_om.entries import message_entry
from prism_om.errors import StoreError
from prism_om.stores.sqlite import SqliteStore

async def main(path):
    async with await SqliteStore.open(path) as store:
        # Set after the open, so the limit hits an append, not the schema.
        resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, resource.RLIM_INFINITY))
        parent = None
        for n in range(1000):
            entry = message_entry("s", "user", "x" * 4000, parent_id=parent, entry_id=f"e{n}")
            try:
                await store.append(entry)
            except StoreError as exc:
                print(type(exc).__name__, n, exc)
                return
            parent = entry.id
        print("no error")

asyncio.run(main(sys.argv[1]))
"""


def test_a_write_past_the_file_size_limit_names_the_limit_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "limited.db"
    done = subprocess.run(
        [sys.executable, "-c", FILE_LIMIT_WRITER, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr
    kind, count, message = done.stdout.split(" ", 2)
    assert kind == "StoreError"
    assert "file size limit" in message and "ulimit -f" in message
    assert str(path) in message
    # Every append before the failing one is still there.
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM entries").fetchone()[0] == int(count)
    conn.close()


def test_a_full_disk_is_named_with_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    import resource

    from prism_om.stores.sqlite import translate as sqlite_module

    class Full:
        f_bavail, f_frsize = 3, 4096

    monkeypatch.setattr(sqlite_module.os, "statvfs", lambda path: Full())
    monkeypatch.setattr(
        sqlite_module.resource,
        "getrlimit",
        lambda which: (resource.RLIM_INFINITY, resource.RLIM_INFINITY),
    )
    exc = sqlite3.OperationalError("database or disk is full")
    exc.sqlite_errorcode = sqlite3.SQLITE_FULL  # type: ignore[attr-defined]
    error = sqlite_module.translate_error("sqlite:/data/s.db", "append", exc)
    assert type(error) is StoreError
    assert "'/data/s.db'" in str(error) and "disk holding it is full (12288 bytes free)" in str(
        error
    )
