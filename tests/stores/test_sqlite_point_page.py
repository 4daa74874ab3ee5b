"""A SQLite page of messages is a point read on the loop's own connection: no thread hop.

Counted, not timed: the hops queued on aiosqlite connections and the statements run on
the loop's connection. The branch's pieces are read once and kept while no other
connection commits (``PRAGMA data_version``); every answer equals the reference store's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism_om.entries import SessionEntry
from prism_om.errors import EntryNotFoundError, InvalidInputError, SessionMismatchError
from prism_om.observational_memory import recall_observational_memory_branch_page
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite.loop_page import POINT_MAX_PIECES
from prism_om.stores.sqlite.loop_reads import POINT_MAX_PARAMS
from prism_om.testing.generate import make_message

from .test_sqlite_one_hop import counted_hops, hops
from .test_sqlite_page_statement import forked_session


class Traced:
    """The statements the loop's connection runs, by kind."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store
        self.statements: list[str] = []

    def __enter__(self) -> Traced:
        raw = self.store._point.get()
        assert raw is not None
        raw.set_trace_callback(self.statements.append)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.store._point.raw is not None:
            self.store._point.raw.set_trace_callback(None)

    def count(self, needle: str) -> int:
        return sum(needle in s for s in self.statements)


@pytest.fixture
async def pair(tmp_path: Path) -> Any:
    memory = MemoryStore()
    async with await SqliteStore.open(tmp_path / "p.db") as store:
        for target in (store, memory):
            await target.append_many(forked_session())
        yield store, memory


async def test_pages_take_no_hop_and_equal_the_reference(pair: Any) -> None:
    store, memory = pair
    for leaf in [None, *await memory.leaves("p")]:
        for cursor in (await memory.entries("p", leaf))[::4]:
            for limit in (1, 7, 20):
                for way in ("forward", "backward"):
                    expected = await memory.page_messages("p", cursor.id, limit, way, leaf)
                    with counted_hops() as count:
                        got = await store.page_messages("p", cursor.id, limit, way, leaf)
                    assert count == [0]
                    assert got == expected, (leaf, cursor.id, limit, way)


async def test_the_pieces_are_read_once_until_another_connection_commits(
    pair: Any, tmp_path: Path
) -> None:
    store, memory = pair
    with Traced(store) as trace:
        await store.page_messages("p", "t30", 5, "forward")
        assert trace.count("RECURSIVE") == 1  # the branch's pieces, read on the first page
        for cursor in ("t31", "t40", "t2"):
            await store.page_messages("p", cursor, 5, "backward")
        assert trace.count("RECURSIVE") == 1  # kept
        # Every page is one read transaction: its statements see one state of the file.
        assert trace.count("BEGIN") == trace.count("COMMIT") == 4
        # Another connection's commit (this store's writer) makes them be read again.
        tail = (await memory.entries("p"))[-1]
        more = make_message("p", "new", tail.id, "user", "after", 500)
        await store.append(more)
        await memory.append(more)
        page = await store.page_messages("p", tail.id, 5, "forward")
        assert page == await memory.page_messages("p", tail.id, 5, "forward")
        assert [e.id for e in page[0]] == ["new"]
        assert trace.count("RECURSIVE") == 2
    assert store._point.raw is not None and not store._point.raw.in_transaction


async def test_a_commit_by_another_process_is_seen(pair: Any, tmp_path: Path) -> None:
    # Another store on the same file stands in for another process: its writer commits,
    # and the next page sees the new leaf, the new entries, and the deleted session.
    store, _ = pair
    leaf = await store.leaf("p")
    assert leaf is not None
    assert await store.page_messages("p", leaf, 5, "forward") == ([], False)
    async with await SqliteStore.open(tmp_path / "p.db") as other:
        added = [
            make_message("p", f"x{n}", f"x{n - 1}" if n else leaf, "user", "x", n) for n in range(3)
        ]
        await other.append_many(added)
        assert await store.page_messages("p", leaf, 5, "forward") == (added, False)
        await other.delete_session("p")
        with pytest.raises(EntryNotFoundError):
            await store.page_messages("p", leaf, 5, "forward")
        # The session again, a different tree under the same ids: nothing stale is used.
        again = [
            make_message("p", f"t{n}", f"t{n - 1}" if n else None, "user", "y", n) for n in range(4)
        ]
        await other.append_many(again)
        assert await store.page_messages("p", "t0", 5, "forward") == (again[1:], False)
        with pytest.raises(EntryNotFoundError):
            await store.page_messages("p", "t10", 5, "forward")


async def test_page_errors_take_no_hop_and_close_the_transaction(pair: Any) -> None:
    store, _ = pair
    other = make_message("q", "q0", None, "user", "other session", 1)
    await store.append(other)
    note = SessionEntry.model_validate(
        {
            "id": "note",
            "sessionId": "p",
            "parentId": "t59",
            "kind": "custom",
            "timestamp": "2025-01-01T00:00:00Z",
            "data": {"type": "app.note"},
        }
    )
    await store.append(note)
    failing: list[tuple[type[Exception], Any]] = [
        (EntryNotFoundError, lambda: store.page_messages("p", "nope", 5)),
        (EntryNotFoundError, lambda: store.page_messages("unknown", "t3", 5)),
        (InvalidInputError, lambda: store.page_messages("p", "note", 5)),
        (EntryNotFoundError, lambda: store.page_messages("p", "t3", 5, leaf_id="missing")),
        (EntryNotFoundError, lambda: store.page_messages("p", "f0-3", 5, leaf_id="f1-24")),
        (SessionMismatchError, lambda: store.page_messages("p", "t3", 5, leaf_id="q0")),
    ]
    for error, call in failing:
        for _ in range(2):  # the second time from the kept pieces
            with counted_hops() as count, pytest.raises(error):
                await call()
            assert count == [0]
            assert store._point.raw is not None and not store._point.raw.in_transaction


async def test_wide_pages_and_many_forks_take_the_hop(tmp_path: Path) -> None:
    entries: list[SessionEntry] = []
    parent: str | None = None
    for n in range(POINT_MAX_PARAMS + 10):
        entries.append(make_message("w", f"m{n}", parent, "user", f"m {n}", n))
        parent = entries[-1].id
    # Each fork starts a new segment: a branch crossing more than POINT_MAX_PIECES.
    for n in range(POINT_MAX_PIECES + 1):
        entries.append(make_message("w", f"s{n}", parent, "user", "side", 900 + n))
        entries.append(make_message("w", f"k{n}", parent, "user", "kept", 950 + n))
        parent = entries[-1].id
    memory = MemoryStore()
    async with await SqliteStore.open(tmp_path / "w.db") as store:
        for target in (store, memory):
            await target.append_many(entries)
        got: list[Any] = []

        async def wide() -> None:
            got.append(await store.page_messages("w", "m0", POINT_MAX_PARAMS, "forward"))

        assert await hops(wide) == 1
        assert got[-1] == await memory.page_messages("w", "m0", POINT_MAX_PARAMS, "forward")

        async def forked() -> None:
            got.append(await store.page_messages("w", "m3", 20, "forward"))

        assert await hops(forked) == 1
        assert got[-1] == await memory.page_messages("w", "m3", 20, "forward")
        assert store._point.raw is not None and not store._point.raw.in_transaction


class BusyConnection:
    """Stands in for the loop's connection: every statement meets a locked file."""

    def __init__(self) -> None:
        self.statements = 0
        self.in_transaction = False

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements += 1
        raise sqlite3.OperationalError("database is locked")


async def test_a_busy_file_takes_the_hop_instead_of_waiting(pair: Any) -> None:
    store, memory = pair
    await store.page_messages("p", "t3", 5)  # opens the loop's connection
    busy = BusyConnection()
    real, store._point.raw = store._point.raw, busy
    try:
        got: list[Any] = []

        async def call() -> None:
            got.append(await store.page_messages("p", "t3", 5))

        assert await hops(call) == 1
        assert busy.statements == 1
        assert got[0] == await memory.page_messages("p", "t3", 5)
    finally:
        store._point.raw = real


async def test_the_public_page_takes_no_hop(pair: Any) -> None:
    store, memory = pair
    got: list[Any] = []

    async def call() -> None:
        got.append(
            await recall_observational_memory_branch_page(
                store, "t10", session_id="p", limit=20, detail="full"
            )
        )

    assert await hops(call) == 0
    expected = await recall_observational_memory_branch_page(
        memory, "t10", session_id="p", limit=20, detail="full"
    )
    assert got[0] == expected
