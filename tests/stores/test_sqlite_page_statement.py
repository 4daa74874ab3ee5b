"""SQLite pages in one statement (``stores/sqlite/page_statement.py``): the same pages as the
reference store, one statement for a page inside the cursor's piece, index searches only.
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from prism_om.entries import SessionEntry
from prism_om.errors import EntryNotFoundError, InvalidInputError, SessionMismatchError
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite.page_statement import PAGE_SQL
from prism_om.stores.sqlite.worker_thread import on_thread
from prism_om.testing.generate import make_message


def forked_session() -> list[SessionEntry]:
    """A trunk of 60 messages with three forks of 25, every role, some custom entries."""
    rng = random.Random(16)
    roles = ("user", "assistant", "tool", "assistant")
    entries: list[SessionEntry] = []
    parent: str | None = None
    for n in range(60):
        entry = make_message("p", f"t{n}", parent, roles[n % 4], f"trunk {n}", n)
        entries.append(entry)
        parent = entry.id
    for fork in range(3):
        parent = f"t{rng.randrange(10, 55)}"
        for n in range(25):
            entry = make_message("p", f"f{fork}-{n}", parent, roles[n % 4], f"fork {n}", 100 + n)
            entries.append(entry)
            parent = entry.id
    return entries


async def both(tmp_path: Path) -> tuple[SqliteStore, MemoryStore]:
    entries = forked_session()
    sqlite_store = await SqliteStore.open(tmp_path / "page.db")
    memory = MemoryStore()
    for store in (sqlite_store, memory):
        await store.append_many(entries)
    return sqlite_store, memory


async def test_pages_equal_the_reference_store_across_forks(tmp_path: Path) -> None:
    store, memory = await both(tmp_path)
    try:
        leaves = await memory.leaves("p")
        for leaf in [None, *leaves]:
            branch = await memory.entries("p", leaf)
            for cursor in branch[::3]:
                for limit in (1, 5, 20, 100):
                    for way in ("forward", "backward"):
                        expected = await memory.page_messages("p", cursor.id, limit, way, leaf)
                        got = await store.page_messages("p", cursor.id, limit, way, leaf)
                        assert got == expected, (leaf, cursor.id, limit, way)
    finally:
        await store.close()


async def test_a_page_inside_the_cursor_piece_is_one_statement(tmp_path: Path) -> None:
    store, _ = await both(tmp_path)
    statements: list[str] = []
    # The page on the reader's thread (the hop's); the loop's own page keeps the branch's
    # pieces instead (tests/stores/test_sqlite_point_page.py).
    store._point.close()
    try:
        await on_thread(store._reader, lambda raw: raw.set_trace_callback(statements.append))
        page, more = await store.page_messages("p", "f1-2", 10, "forward", "f1-24")
        assert [e.id for e in page] == [f"f1-{n}" for n in range(3, 13)] and more
        assert len(statements) == 1
        statements.clear()
        # Across the fork point: the trunk's piece is read by one more statement.
        page, _ = await store.page_messages("p", "f1-1", 10, "backward", "f1-24")
        assert [e.id for e in page][-1] == "f1-0"
        assert len(statements) == 2
    finally:
        await on_thread(store._reader, lambda raw: raw.set_trace_callback(None))
        await store.close()


async def test_page_errors_come_in_the_same_order(tmp_path: Path) -> None:
    store, memory = await both(tmp_path)
    custom = SessionEntry.model_validate(
        {
            "id": "note",
            "sessionId": "p",
            "parentId": "t59",
            "kind": "custom",
            "timestamp": "2025-01-01T00:00:00Z",
            "data": {"type": "app.note"},
        }
    )
    try:
        for target in (store, memory):
            await target.append(custom)
            with pytest.raises(EntryNotFoundError):
                await target.page_messages("p", "nope", 5)
            with pytest.raises(EntryNotFoundError):
                await target.page_messages("unknown", "t3", 5)
            with pytest.raises(InvalidInputError):
                await target.page_messages("p", "note", 5)
            with pytest.raises(EntryNotFoundError):
                await target.page_messages("p", "t3", 5, leaf_id="missing")
            # A cursor on another branch than the given leaf's.
            with pytest.raises(EntryNotFoundError):
                await target.page_messages("p", "f0-3", 5, leaf_id="f1-24")
        other = make_message("q", "q0", None, "user", "other session", 1)
        await store.append(other)
        with pytest.raises(SessionMismatchError):
            await store.page_messages("p", "t3", 5, leaf_id="q0")
    finally:
        await store.close()


async def test_the_page_statement_searches_indexes_only(tmp_path: Path) -> None:
    store, _ = await both(tmp_path)
    await store.close()
    conn = sqlite3.connect(tmp_path / "page.db")
    try:
        for (way, leaf), sql in PAGE_SQL.items():
            params = {"session_id": "p", "leaf_id": "f2-24", "cursor": "t20", "want": 21}
            plan = [row[3] for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
            scans = [step for step in plan if step.startswith("SCAN") and "entries" in step]
            scans += [step for step in plan if step.startswith("SCAN e ")]
            assert scans == [], (way, leaf, plan)
            # The rows come off the index in page order: nothing read in full to be sorted.
            assert not any("TEMP B-TREE" in step for step in plan), (way, leaf, plan)
            assert any("entries_segment_depth" in step for step in plan), (way, leaf, plan)
    finally:
        conn.close()
