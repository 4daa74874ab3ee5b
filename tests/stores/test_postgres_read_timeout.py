"""Bounded PostgreSQL reads (a leaf, a page, a recall, recent messages) end within the
store's ``timeout_s`` (+ 1 s) even when the server stops answering; whole-branch reads
are not cut; a lock timeout ends a read at once.

A lock wait already ends at ``lock_timeout`` (``test_postgres_lock_wait``). What was left
is a server or a network that holds the connection open and answers nothing: the read
waited forever. Here the backend serving the store's read connection is frozen with
``SIGSTOP`` (the throwaway cluster is this machine's), and the read must raise
``StoreBusyError`` instead of hanging.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from support.postgres import URL_VARIABLE

from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import StoreBusyError
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.postgres import PostgresStore, connection, split_postgres_url
from prism_om.stores.postgres.connection import PoolReader
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import random_builder

TIMEOUT_S = 1.0  # a bounded read ends 1 s later: the deadline is timeout_s + 1 s
# psycopg, when a read is cancelled, waits up to 5 s for the server to confirm before
# it closes the connection: the read ends well within this.
GUARD_S = 20.0


async def chain(store: PostgresStore, count: int) -> list[SessionEntry]:
    entries: list[SessionEntry] = []
    parent = None
    for k in range(count):
        entry = message_entry("s", "user" if k % 2 == 0 else "assistant", f"m{k}", parent_id=parent)
        entries.append(entry)
        parent = entry.id
    await store.append_many(entries)
    return entries


def frozen_backend(store: PostgresStore) -> int:
    """The server process of the store's read connection (the lane), if it can be frozen."""
    if os.environ.get(URL_VARIABLE):
        pytest.skip("the server is not this test's to freeze")
    reader: PoolReader = store._reader
    lane = reader._lane
    assert lane is not None
    pid = int(lane.info.backend_pid)
    try:
        os.kill(pid, 0)
    except PermissionError:
        pytest.skip("this user may not signal the server's processes")
    return pid


@pytest.mark.parametrize("read", ["page", "leaf"])
async def test_a_bounded_read_on_a_frozen_server_is_busy_not_stuck(
    postgres_url: str, read: str
) -> None:
    async with await PostgresStore.open(postgres_url, timeout_s=TIMEOUT_S) as store:
        entries = await chain(store, 30)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            # A PostgreSQL-only statement (reads.py) and a transpiled one (SqlReads).
            "page": lambda: store.page_messages("s", entries[3].id, 5),
            "leaf": lambda: store.leaf("s"),
        }
        call = calls[read]
        expected = await call()  # the read connection is kept from here on
        pid = frozen_backend(store)
        os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(StoreBusyError, match="no answer from the server within 2 s"):
                await asyncio.wait_for(call(), GUARD_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        # The frozen connection was given up; the next read takes another.
        assert await call() == expected


BoundedLog = list[tuple[str, bool]]


@pytest.fixture
def bounded_log(monkeypatch: pytest.MonkeyPatch) -> BoundedLog:
    """Each statement the reader runs, with whether it ran under the timeout."""
    log: BoundedLog = []
    read = PoolReader._read

    async def logged(self: PoolReader, text: str, params: Any, bounded: bool) -> list[Any]:
        log.append((" ".join(text.split())[:60], bounded))
        return await read(self, text, params, bounded)

    monkeypatch.setattr(PoolReader, "_read", logged)
    return log


async def test_the_bounded_reads_and_only_they_run_under_the_timeout(
    postgres_url: str, bounded_log: BoundedLog
) -> None:
    builder = random_builder(3, 60, forks=True)
    async with await PostgresStore.open(postgres_url) as store:
        await load_builder(store, builder)
        session = builder.path[0].session_id
        memory_id = next(
            o["id"]
            for e in builder.path
            if e.data is not None and e.data.get("type") == "om.observations.recorded"
            for o in e.data["observations"]
        )
        message = next(e.id for e in builder.path if e.kind == "message")
        bounded: dict[str, Callable[[], Awaitable[Any]]] = {
            "leaf": lambda: store.leaf(session),
            "page": lambda: store.page_messages(session, message, 10),
            "recent": lambda: store.recent_messages(session, 10),
            "recent at a leaf": lambda: store.recent_messages(session, 10, builder.path[-1].id),
            "recall": lambda: recall_observational_memory(store, memory_id, session_id=session),
            "get": lambda: store.get(message),
        }
        unbounded: dict[str, Callable[[], Awaitable[Any]]] = {
            "list": lambda: store.list(session),
            "ledger": lambda: store.ledger(session),
            "entries": lambda: store.entries(session),
        }
        for name, call in {**bounded, **unbounded}.items():
            bounded_log.clear()
            await call()
            assert bounded_log, name
            flags = [flag for _, flag in bounded_log]
            if name in bounded:
                assert all(flags), (name, bounded_log)
            else:
                # They find the leaf first (bounded), then read rows that grow with the
                # session: those are not cut.
                assert not all(flags), (name, bounded_log)


async def test_a_lock_timeout_is_answered_once_not_read_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock wait the server ends (``lock_timeout``) is an answer on a live connection,
    not a lost one: the read is not run again on two more connections (which made a
    read behind a held lock take three times ``timeout_s``)."""
    async with await PostgresStore.open(postgres_url, timeout_s=TIMEOUT_S) as store:
        await chain(store, 3)
        runs: list[str] = []
        fetch = connection._fetch

        async def counted(raw: Any, text: str, params: Any, cursor: Any = None) -> list[Any]:
            runs.append(text)
            return await fetch(raw, text, params, cursor)

        monkeypatch.setattr(connection, "_fetch", counted)
        conninfo, schema, _ = split_postgres_url(postgres_url)
        async with await psycopg.AsyncConnection.connect(
            conninfo, options=f"-c search_path={schema}"
        ) as locker:
            await locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
            with pytest.raises(StoreBusyError, match="lock timeout"):
                await asyncio.wait_for(store.recent_messages("s", 5), GUARD_S)
            await locker.rollback()
        assert len(runs) == 1, runs
