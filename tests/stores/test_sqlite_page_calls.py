"""The public SQLite page of 20 in few plain calls, on the loop's own connection.

Counted, not timed: the Python calls of prism_om made by one public page on the loop's
connection (``sys.setprofile``), and the statements among them. The page reads through the
store's declared ``page_message_parts`` (one route for every caller: the public function
checks its arguments before reading, and the store, a public method, checks them again),
in plain calls without a coroutine chain or a thread hop. The pages, the errors and what
another connection's commit does are the ones the store's own path gives. The rows
statement of a page builds no temporary table (its role list did, on every run).
"""

from __future__ import annotations

import collections
import sqlite3
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from prism_om.errors import (
    EntryNotFoundError,
    InvalidInputError,
    InvalidSessionIdError,
    StoreClosedError,
)
from prism_om.observational_memory import recall_observational_memory_branch_page
from prism_om.observational_memory.page import (
    recall_observational_memory_branch_page_from_store,
)
from prism_om.stores._schema import load_schema
from prism_om.stores.memory import MemoryStore
from prism_om.stores.sql.statements import ELIGIBLE_ROLES, PAGE_FORWARD_SQL, RECENT_MESSAGES_SQL
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite.page_statement import PIECE_ROWS_SQL
from prism_om.testing.generate import make_message

from .test_sqlite_one_hop import hops

PAGE_CALLS_MAX = 44
"""prism_om calls of one public page on the loop: 33 when the function handed checked
arguments to a private store method; the declared ``page_message_parts`` (a public store
method, so it checks its own arguments: leaf, limit, cursor) added 11. The bound is there
to catch a read growing a loop or a second pass, which ``test_..._flat_in_the_branch``
catches in whatever form it comes."""


def _session(n: int = 60) -> list[Any]:
    entries = []
    parent = None
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        entries.append(make_message("p", f"t{i}", parent, role, f"message {i}", i))
        parent = f"t{i}"
    return entries


@pytest.fixture
async def pair(tmp_path: Path) -> Any:
    memory = MemoryStore()
    async with await SqliteStore.open(tmp_path / "p.db") as store:
        for target in (store, memory):
            await target.append_many(_session())
        yield store, memory


async def calls_of(call: Callable[[], Awaitable[object]]) -> collections.Counter[str]:
    """The prism_om functions ``call()`` entered, by qualified name."""
    counted: collections.Counter[str] = collections.Counter()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event == "call" and "prism_om" in frame.f_code.co_filename:
            counted[frame.f_code.co_qualname] += 1

    sys.setprofile(profile)
    try:
        await call()  # the call (where the arguments are checked) and the read
    finally:
        sys.setprofile(None)
    return counted


async def test_the_public_page_reads_in_few_plain_calls(pair: Any) -> None:
    store, _ = pair
    for _ in range(2):  # the branch's pieces are kept after the first page
        await recall_observational_memory_branch_page(store, "t10", session_id="p", limit=20)
    counted = collections.Counter[str]()

    async def page() -> object:
        nonlocal counted
        counted = await calls_of(
            lambda: recall_observational_memory_branch_page(store, "t10", session_id="p", limit=20)
        )
        return None

    assert await hops(page) == 0
    # The function's own checks, then the declared store method's.
    assert counted["validate_session_id"] == 2
    assert counted["resolve_page_limit"] == 2
    assert counted["drive"] == 0  # no coroutine chain driven for the read
    assert counted["PointConnection.fetch"] == 4  # BEGIN, data_version, cursor, rows
    assert sum(counted.values()) <= PAGE_CALLS_MAX, counted


async def test_the_public_page_calls_are_flat_in_the_branch(tmp_path: Path) -> None:
    # The same page (20 messages before the same leaf) on a branch ten times as long makes
    # exactly the same calls: nothing in the read walks the branch.
    counts = []
    for n in (60, 600):
        async with await SqliteStore.open(tmp_path / f"flat{n}.db") as store:
            await store.append_many(_session(n))
            leaf = f"t{n - 1}"
            for _ in range(2):
                await recall_observational_memory_branch_page(store, leaf, session_id="p", limit=20)
            counts.append(
                await calls_of(
                    lambda store=store, leaf=leaf: recall_observational_memory_branch_page(
                        store, leaf, session_id="p", limit=20
                    )
                )
            )
    assert counts[0] == counts[1]
    assert counts[0]["PointConnection.fetch"] == 4


async def test_the_page_called_with_a_bad_session_fails_before_reading(pair: Any) -> None:
    # The store no longer checks the session id on this path: the page function does, at
    # once, even when called directly rather than through the facade.
    store, _ = pair
    with pytest.raises(InvalidSessionIdError):
        recall_observational_memory_branch_page_from_store(store, "../p", "t10", limit=20)
    with pytest.raises(InvalidSessionIdError):
        recall_observational_memory_branch_page(store, "t10", session_id="../p", limit=20)
    with pytest.raises(InvalidInputError, match="session_id"):
        recall_observational_memory_branch_page(store, "t10", limit=20)


@pytest.mark.parametrize("detail", ["summary", "full"])
@pytest.mark.parametrize("direction", ["forward", "backward"])
async def test_the_public_page_equals_the_reference(pair: Any, detail: Any, direction: Any) -> None:
    store, memory = pair
    for cursor in ("t0", "t1", "t10", "t40", "t58", "t59"):
        for limit in (1, 20, 63, 64, 100):  # 64 and more take the hop
            got = await recall_observational_memory_branch_page(
                store, cursor, session_id="p", limit=limit, direction=direction, detail=detail
            )
            expected = await recall_observational_memory_branch_page(
                memory, cursor, session_id="p", limit=limit, direction=direction, detail=detail
            )
            assert got == expected, (cursor, limit)


async def test_the_public_page_sees_another_connections_commit(pair: Any, tmp_path: Path) -> None:
    # Another store on the same file stands in for another process: the kept pieces are
    # dropped when it commits, so the public page reads the new branch, never a stale one.
    store, memory = pair
    await recall_observational_memory_branch_page(store, "t50", session_id="p", limit=20)
    async with await SqliteStore.open(tmp_path / "p.db") as other:
        added = [
            make_message("p", f"x{n}", f"x{n - 1}" if n else "t59", "user", f"x{n}", 100 + n)
            for n in range(3)
        ]
        await other.append_many(added)
        await memory.append_many(added)
        got = await recall_observational_memory_branch_page(store, "t50", session_id="p", limit=20)
        expected = await recall_observational_memory_branch_page(
            memory, "t50", session_id="p", limit=20
        )
        assert got == expected
        assert [m["id"] for m in got.messages][-3:] == ["x0", "x1", "x2"]
        await other.delete_session("p")
        with pytest.raises(EntryNotFoundError):
            await recall_observational_memory_branch_page(store, "t50", session_id="p", limit=20)


async def test_a_closed_store_refuses_the_public_page(tmp_path: Path) -> None:
    store = await SqliteStore.open(tmp_path / "c.db")
    await store.append_many(_session(4))
    await store.close()
    with pytest.raises(StoreClosedError):
        await recall_observational_memory_branch_page(store, "t1", session_id="p", limit=2)


_ROWS_STATEMENTS = {
    **{f"piece rows {key}": sql for key, sql in PIECE_ROWS_SQL.items()},
    # A turn's recent messages (context) and the reopen's tail read these two as they are.
    "recent messages": RECENT_MESSAGES_SQL,
    "page forward": PAGE_FORWARD_SQL,
}


@pytest.mark.parametrize("name", sorted(_ROWS_STATEMENTS))
def test_a_pieces_rows_build_no_temporary_table(tmp_path: Path, name: str) -> None:
    # ``role IN (?, ?, ?)`` made SQLite build a temporary b-tree of the roles on every
    # run (an OpenEphemeral in the program): ~2.5 µs of a page of 20, for three values.
    conn = sqlite3.connect(tmp_path / "plan.db")
    for statement in load_schema().statements:
        conn.execute(statement)
    params = (1, 0, 10, *ELIGIBLE_ROLES, 21)
    program = [row[1] for row in conn.execute("EXPLAIN " + _ROWS_STATEMENTS[name], params)]
    conn.close()
    assert "OpenEphemeral" not in program
    assert program.count("DeferredSeek") == 1  # still one walk of the (segment, depth) index


async def test_a_raw_page_reads_four_columns_a_row(pair: Any) -> None:
    # The loop's page_messages read six columns a row (the whole entry row); the session
    # and the kind are the page's own, so it reads four and builds the same entries.
    store, memory = pair
    await store.page_messages("p", "t10", 20)
    statements: list[str] = []
    raw = store._point.raw
    assert raw is not None
    raw.set_trace_callback(statements.append)
    try:
        for way in ("forward", "backward"):
            got = await store.page_messages("p", "t30", 20, way)
            assert got == await memory.page_messages("p", "t30", 20, way)
    finally:
        raw.set_trace_callback(None)
    rows = [s for s in statements if "ORDER BY depth" in s]
    assert len(rows) == 2
    for statement in rows:
        columns = statement.split("SELECT", 1)[1].split("FROM", 1)[0]
        assert columns.count(",") + 1 == 4, statement  # was 6
