"""Each public call on the SQLite store costs one hop to its connection's thread.

A hop (aiosqlite queueing a call on the connection's worker thread and waiting for it)
is what a page, a recall or an append of one entry used to pay several times over. The
count is a property of the code, not of the machine: no clock is read here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import aiosqlite
import pytest

from bench.data import SESSION_ID, build_dataset, continuation
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores.sqlite import SqliteStore


@contextmanager
def counted_hops() -> Iterator[list[int]]:
    """Count calls queued on any aiosqlite connection's thread while inside."""
    count = [0]
    original = aiosqlite.Connection._execute

    async def counting(self: aiosqlite.Connection, fn: Any, *args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return await original(self, fn, *args, **kwargs)

    aiosqlite.Connection._execute = counting  # type: ignore[method-assign]
    try:
        yield count
    finally:
        aiosqlite.Connection._execute = original  # type: ignore[method-assign]


async def hops(call: Callable[[], Awaitable[object]]) -> int:
    with counted_hops() as count:
        await call()
    return count[0]


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    data = build_dataset(1200)
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await store.append_many(data.entries)
        yield store, data


async def test_a_page_of_twenty_is_one_hop(store: Any) -> None:
    s, data = store
    cursor = data.middle_message_id()

    async def page() -> None:
        found = await recall_observational_memory_branch_page(
            s, cursor, session_id=SESSION_ID, limit=20
        )
        assert len(found.messages) == 20

    # A point read now: no hop at all (tests/stores/test_sqlite_point_page.py).
    assert await hops(page) <= 1
    for direction in ("forward", "backward"):
        assert await hops(lambda d=direction: s.page_messages(SESSION_ID, cursor, 20, d)) <= 1


async def test_recall_with_its_sources_is_one_hop(store: Any) -> None:
    s, data = store
    memory_id, source_id = data.middle_memory_id()

    async def recall() -> None:
        found = await recall_observational_memory(s, memory_id, session_id=SESSION_ID)
        assert found.found and [src["id"] for src in found.sources] == [source_id]

    # A point read now: no hop at all (tests/stores/test_sqlite_point_reads.py).
    assert await hops(recall) <= 1


async def test_context_blocks_read_in_one_hop(store: Any) -> None:
    s, _ = store

    async def blocks() -> None:
        assert await build_observational_memory_context_blocks(s, session_id=SESSION_ID)

    assert await hops(blocks) == 1


async def test_reads_that_took_several_statements_are_one_hop(store: Any) -> None:
    s, data = store
    leaf = data.last_id
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: s.entries(SESSION_ID),
        # recent_messages(20) is a point read now: no hop (test_sqlite_lazy_open.py).
        lambda: s.ledger(SESSION_ID),
        lambda: s.live_ledger(SESSION_ID),
        lambda: s.entries_after(SESSION_ID, data.middle_message_id()),
        lambda: s.is_on_branch(SESSION_ID, data.entries[3].id, leaf),
        lambda: s.memory_head(SESSION_ID),
        lambda: s.last_compaction(SESSION_ID),
        lambda: s.get_many([e.id for e in data.entries[:700]]),
    ]
    assert [await hops(call) for call in calls] == [1] * len(calls)


async def test_an_append_is_one_hop_and_a_failed_one_leaves_nothing(store: Any) -> None:
    s, data = store
    more = continuation(data, 3, "x")
    assert await hops(lambda: s.append(more[0])) == 1
    assert await hops(lambda: s.append_many(more[1:])) == 1
    assert await s.leaf(SESSION_ID) == more[-1].id
    with pytest.raises(Exception, match="already"):
        await s.append(more[0])
    assert await s.leaf(SESSION_ID) == more[-1].id
    assert len(await s.entries(SESSION_ID)) == len(data.entries) + 3


async def test_drive_refuses_a_coroutine_that_would_wait() -> None:
    import asyncio

    from prism_om.stores.sqlite.worker_thread import drive

    async def answers() -> int:
        return 7

    cleaned: list[bool] = []

    async def waits() -> int:
        try:
            await asyncio.sleep(0.01)
        finally:
            cleaned.append(True)  # closed, so its rollback path runs
        return 1

    assert drive(answers()) == 7
    with pytest.raises(RuntimeError, match="tried to wait"):
        drive(waits())
    assert cleaned == [True]
