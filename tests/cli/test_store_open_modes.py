"""Which CLI commands may create or write a store (issue 13 items 6 and 7), and what
``sessions`` reads (items 17 and 19)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path

import pytest
from support.cli import failed, ok, run_cli

from prism_om.entries import message_entry
from prism_om.reports.session_list import session_rows
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore

DATA = Path(__file__).resolve().parents[1] / "data"
FIXTURE = DATA / "sqlite" / "store-v1.db"
TRANSCRIPT = DATA / "import" / "openai_array.json"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    "command",
    [
        ["import", str(TRANSCRIPT)],
        ["observe", "--session", "s", "--force"],
        ["compact", "--session", "s"],
    ],
)
def test_writing_commands_refuse_a_memory_store(tmp_path: Path, command: list[str]) -> None:
    line = failed(run_cli(*command, "--db", "memory:", cwd=tmp_path), 2)
    assert "in-memory store" in line and "nothing written" in line
    assert list(tmp_path.iterdir()) == []


def test_reading_commands_accept_a_memory_store(tmp_path: Path) -> None:
    assert "no sessions" in ok(run_cli("sessions", "--db", "memory:", cwd=tmp_path))


def test_reads_never_turn_an_empty_file_into_a_store(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    for command in (["sessions"], ["view", "--session", "s"], ["status", "--session", "s"]):
        line = failed(run_cli(*command, "--db", str(empty), cwd=tmp_path), 2)
        assert "empty.txt" in line and "empty" in line
    observe = failed(run_cli("observe", "--session", "s", "--db", str(empty), cwd=tmp_path), 2)
    assert "empty.txt" in observe
    assert empty.read_bytes() == b""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty.txt"]


async def test_import_still_creates_and_sessions_lists_from_the_summaries(
    tmp_path: Path,
) -> None:
    db = tmp_path / "new.db"
    ok(run_cli("import", str(TRANSCRIPT), "--session", "chat", "--db", str(db), cwd=tmp_path))
    rows = json.loads(ok(run_cli("sessions", "--json", "--db", str(db), cwd=tmp_path)))
    async with await SqliteStore.open(db, read_only=True) as store:
        listed = await store.list("chat")
    assert [(r["session"], r["leaves"], r["leaf"]) for r in rows] == [("chat", 1, listed[-1].id)]
    assert rows[0]["entries"] == len(listed)
    assert rows[0]["messages"] == sum(1 for e in listed if e.kind == "message") > 0


def test_sessions_refuses_an_old_store_unchanged_and_lists_it_once_migrated(
    tmp_path: Path,
) -> None:
    db = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, db)
    before = digest(db)
    # A read neither migrates nor touches the file: it says how to migrate it.
    line = failed(run_cli("sessions", "--json", "--db", str(db), cwd=tmp_path), 1)
    assert str(db) in line and "schema version 1, older" in line and "open it once" in line
    assert digest(db) == before
    asyncio.run(_migrate(db))
    rows = json.loads(ok(run_cli("sessions", "--json", "--db", str(db), cwd=tmp_path)))
    by_id = {r["session"]: r for r in rows}
    assert list(by_id) == ["om-a", "om-b", "mixed-times"]
    # Compared as times: "20260318 101010" is not later than 2026-03-22.
    assert by_id["mixed-times"]["lastActivity"] == "2026-03-22T09:30:00.000Z"
    assert by_id["mixed-times"]["leaves"] == 2
    table = ok(run_cli("sessions", "--db", str(db), cwd=tmp_path))
    assert "2026-03-22 09:30:00" in table


async def _migrate(db: Path) -> None:
    """The first writable open migrates the file (what the refusal tells the user)."""
    async with await SqliteStore.open(db):
        pass


async def test_session_rows_compare_times_on_a_store_without_summaries() -> None:
    async with MemoryStore() as store:
        parent = None
        for n, stamp in enumerate(["2026-03-22T09:30:00Z", "20260318 101010"]):
            entry = message_entry(
                "s", "user", "hi", parent_id=parent, entry_id=f"e{n}", timestamp=stamp
            )
            await store.append(entry)
            parent = entry.id
        (row,) = await session_rows(store)
    assert row["lastActivity"] == "2026-03-22T09:30:00.000Z"
    assert (row["entries"], row["messages"], row["leaves"], row["leaf"]) == (2, 2, 1, "e1")


async def test_session_rows_read_no_entries_on_sqlite(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await store.append(message_entry("s", "user", "hi", entry_id="e0"))

        async def no_whole_session_reads(*args: object) -> None:
            raise AssertionError("sessions must not read every entry")

        monkeypatch.setattr(store, "list", no_whole_session_reads)
        monkeypatch.setattr(store, "leaves", no_whole_session_reads)
        (row,) = await session_rows(store)
    assert (row["session"], row["entries"], row["leaf"]) == ("s", 1, "e0")
