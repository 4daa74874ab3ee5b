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
from support.pg_connections import Watched, watch_connections
from support.postgres import URL_VARIABLE
from support.sql_work import statements

from prism_om.entries import SessionEntry, message_entry
from prism_om.errors import StoreBusyError
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.postgres import PostgresStore, split_postgres_url
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


def frozen_backends(watched: Watched) -> set[int]:
    """The server processes of the store's open connections, if they can be frozen."""
    if os.environ.get(URL_VARIABLE):
        pytest.skip("the server is not this test's to freeze")
    pids = watched.open_pids()
    assert pids
    try:
        for pid in pids:
            os.kill(pid, 0)
    except PermissionError:
        pytest.skip("this user may not signal the server's processes")
    return pids


@pytest.mark.parametrize("read", ["page", "leaf"])
async def test_a_bounded_read_on_a_frozen_server_is_busy_not_stuck(
    postgres_url: str, read: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watch_connections(monkeypatch) as watched:
        store = await PostgresStore.open(postgres_url, timeout_s=TIMEOUT_S)
    async with store:
        entries = await chain(store, 30)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            # A PostgreSQL-only statement (reads.py) and a transpiled one (SqlReads).
            "page": lambda: store.page_messages("s", entries[3].id, 5),
            "leaf": lambda: store.leaf("s"),
        }
        call = calls[read]
        expected = await call()
        pids = frozen_backends(watched)  # every connection the store holds
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            with pytest.raises(StoreBusyError, match="no answer from the server within 2 s"):
                await asyncio.wait_for(call(), GUARD_S)
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        # The frozen connection was given up; the next read answers.
        assert await call() == expected


class LateServer:
    """Statement ``k`` of a call run by ``run`` waits ``seconds`` before it is sent, as if
    the server answered it that late (patched on psycopg's ``AsyncCursor.execute``, so
    whichever connection the store reads on). Calls are told apart by their task."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._plans: dict[asyncio.Task[Any], tuple[int, float]] = {}
        self.sent: dict[asyncio.Task[Any], int] = {}
        execute = psycopg.AsyncCursor.execute

        async def late(cursor: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
            task = asyncio.current_task()
            if task in self._plans:
                k, seconds = self._plans[task]
                if self.sent.setdefault(task, 0) == k:
                    await asyncio.sleep(seconds)
                self.sent[task] += 1
            return await execute(cursor, query, *args, **kwargs)

        monkeypatch.setattr(psycopg.AsyncCursor, "execute", late)

    async def run(self, call: Callable[[], Awaitable[Any]], k: int, seconds: float) -> Any:
        """``call()`` with its statement ``k`` late (none when ``k`` is -1); its result,
        or the error it raised."""
        task = asyncio.current_task()
        assert task is not None
        self._plans[task] = (k, seconds)
        try:
            return await call()
        except StoreBusyError as exc:
            return exc
        finally:
            del self._plans[task]

    async def statements_of(self, call: Callable[[], Awaitable[Any]]) -> int:
        """How many statements ``call()`` sends when none is late."""
        await self.run(call, -1, 0)
        task = asyncio.current_task()
        assert task is not None
        return self.sent.pop(task, 0)


async def test_the_bounded_reads_and_only_they_end_at_the_deadline(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every statement of a bounded read is cut when the server does not answer it; a
    whole-branch read's rows, which grow with the session, are waited for."""
    builder = random_builder(3, 60, forks=True)
    # Enough connections that every call below runs at once, none waiting for the pool.
    async with await PostgresStore.open(postgres_url, timeout_s=0.1, pool_size=20) as store:
        await load_builder(store, builder)
        deadline = 0.1 + 1  # timeout_s + 1 s
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
        server = LateServer(monkeypatch)
        expected = {name: await call() for name, call in {**bounded, **unbounded}.items()}
        runs: list[tuple[str, int, Awaitable[Any]]] = []
        for name, call in bounded.items():
            # Each statement in turn answered well after the deadline: cut at it.
            for k in range(await server.statements_of(call)):
                runs.append((name, k, server.run(call, k, deadline + 2)))
        for name, call in unbounded.items():
            # They find the leaf first (bounded), then read rows that grow with the
            # session: the last statement, answered after the deadline, is not cut.
            last = await server.statements_of(call) - 1
            runs.append((name, last, server.run(call, last, deadline + 0.5)))
        got = await asyncio.wait_for(asyncio.gather(*(run for _, _, run in runs)), GUARD_S)
        for (name, k, _), result in zip(runs, got, strict=True):
            if name in bounded:
                assert isinstance(result, StoreBusyError), (name, k, result)
                assert "no answer from the server within 1.1 s" in str(result), (name, k)
            else:
                assert result == expected[name], (name, k)


async def test_a_lock_timeout_is_answered_once_not_read_again(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock wait the server ends (``lock_timeout``) is an answer on a live connection,
    not a lost one: the read is not run again on two more connections (which made a
    read behind a held lock take three times ``timeout_s``)."""
    async with await PostgresStore.open(postgres_url, timeout_s=TIMEOUT_S) as store:
        await chain(store, 3)
        with statements(monkeypatch) as traced:
            pass  # the store is open already: psycopg's statements are traced from now
        conninfo, schema, _ = split_postgres_url(postgres_url)
        async with await psycopg.AsyncConnection.connect(
            conninfo, options=f"-c search_path={schema}"
        ) as locker:
            await locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
            with traced.counting() as run, pytest.raises(StoreBusyError, match="lock timeout"):
                await asyncio.wait_for(store.recent_messages("s", 5), GUARD_S)
            await locker.rollback()
        assert run.count == 1, run.statements  # the statement that met the lock, once
