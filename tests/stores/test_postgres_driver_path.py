"""The PostgreSQL read path at the wire: what each read sends, counted, never timed.

libpq's protocol trace (``PGconn.trace``) of every connection the store holds (found at
psycopg's boundary, ``support.pg_connections``) shows every message the client sends: a
warm read is one round trip (one ``Sync``), prepared (only ``Bind``/``Execute``), with
no ``BEGIN``, ``COMMIT`` or ``SET`` of its own, its results in binary, on no new cursor.
A prepared statement the server lost, and a connection killed while a read waits on the
server, end in the right answer or a typed error; a long read's rows are not kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import pq
from support.pg_connections import Watched, watch_connections

from prism_om.errors import StoreError
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.stores.postgres import split_postgres_url
from prism_om.testing.generate import make_message
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder

Loaded = tuple[SessionStore, MemoryStore, BranchBuilder, Watched]


@pytest.fixture
async def loaded(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Loaded]:
    builder = random_builder(5, 80, forks=False)
    with watch_connections(monkeypatch) as watched:
        pg = await open_store(postgres_url)
    memory = MemoryStore()
    for store in (pg, memory):
        await load_builder(store, builder)
    try:
        yield pg, memory, builder, watched
    finally:
        await pg.close()


def first_observation(builder: BranchBuilder) -> str:
    return next(
        str(o["id"])
        for e in builder.path
        if e.data is not None and e.data.get("type") == "om.observations.recorded"
        for o in e.data["observations"]
    )


def a_message(builder: BranchBuilder) -> str:
    return next(e.id for e in builder.path if e.kind == "message")


@contextlib.contextmanager
def traced(watched: Watched) -> Iterator[list[tuple[str, str, str]]]:
    """(who, message, fields) for every protocol message on the store's open connections
    while inside: who is "F" (the client, frontend) or "B" (the server, backend). A
    connection made inside is not traced: none is, the block fails."""
    messages: list[tuple[str, str, str]] = []
    connections = watched.open()
    made = len(watched.made)
    with contextlib.ExitStack() as stack:
        outs = []
        for conn in connections:
            out = stack.enter_context(tempfile.TemporaryFile("w+"))
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            outs.append(out)
        try:
            yield messages
        finally:
            for conn, out in zip(connections, outs, strict=True):
                if not conn.closed:
                    conn.pgconn.untrace()
                out.seek(0)
                for line in out.read().splitlines():
                    if line[:2] not in ("F\t", "B\t"):
                        continue  # a value's own line break, inside the message before
                    who, _, message, *fields = line.split("\t")
                    messages.append((who, message, "\t".join(fields).strip()))
    assert len(watched.made) == made, "a connection was made while traced"


def sent(messages: list[tuple[str, str, str]], kind: str) -> int:
    return sum(1 for who, message, _ in messages if who == "F" and message == kind)


async def test_a_warm_read_is_one_round_trip_with_no_parse(loaded: Loaded) -> None:
    pg, memory, builder, watched = loaded
    memory_id, cursor = first_observation(builder), a_message(builder)

    async def page(store: SessionStore) -> Any:
        return await recall_observational_memory_branch_page(
            store, cursor, session_id="s1", limit=3
        )

    async def recall(store: SessionStore) -> Any:
        return await recall_observational_memory(store, memory_id, session_id="s1")

    for read in (page, recall):
        for _ in range(6):  # psycopg prepares a statement at its sixth run
            await read(pg)
        for _ in range(3):
            with traced(watched) as messages:
                got = await read(pg)
            assert got == await read(memory)
            assert sent(messages, "Sync") == 1, messages
            assert sent(messages, "Parse") == 0, messages  # prepared: Bind + Execute only
            assert sent(messages, "Query") == 0, messages  # no BEGIN, COMMIT or SET


async def test_reads_come_back_in_binary(loaded: Loaded) -> None:
    pg, memory, builder, watched = loaded
    await pg.leaf("s1")
    entry_id = builder.path[-1].id
    with traced(watched) as messages:
        assert await pg.leaf("s1") == await memory.leaf("s1")
        assert await pg.get(entry_id) == await memory.get(entry_id)
        assert await pg.page_messages("s1", a_message(builder), 3) == (
            await memory.page_messages("s1", a_message(builder), 3)
        )
    columns = [
        fields.split()  # count, then per column: name table attr type size mod format
        for who, message, fields in messages
        if who == "B" and message == "RowDescription"
    ]
    assert len(columns) == 3
    for fields in columns:
        formats = fields[7::7]
        assert formats and set(formats) == {"1"}, fields


async def test_reads_reuse_the_lanes_cursor(
    loaded: Loaded, monkeypatch: pytest.MonkeyPatch
) -> None:
    pg, _, builder, _ = loaded
    await pg.leaf("s1")
    made = 0
    cursor = psycopg.AsyncConnection.cursor

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal made
        made += 1
        return cursor(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "cursor", counted)
    for _ in range(5):
        await pg.leaf("s1")
        await pg.page_messages("s1", a_message(builder), 3)
        await pg.get(builder.path[-1].id)
    assert made == 0


async def test_a_prepared_statement_the_server_lost_is_prepared_again(loaded: Loaded) -> None:
    pg, memory, builder, watched = loaded
    entry_id = builder.path[-1].id
    for _ in range(6):  # prepared whatever psycopg's threshold
        await pg.get(entry_id)
    connections = watched.open()
    for conn in connections:
        # Behind psycopg's back, as a transaction-mode pooler or a DISCARD would.
        conn.pgconn.exec_(b"DEALLOCATE ALL")
    with traced(watched) as messages:
        assert await pg.get(entry_id) == await memory.get(entry_id)
    errors = [m for m in messages if m[0] == "B" and m[1] == "ErrorResponse"]
    assert len(errors) == 1 and "does not exist" in errors[0][2], "failed once, then read"
    assert watched.open() == connections, "the connection itself was fine: kept"
    assert await pg.get(entry_id) == await memory.get(entry_id)


async def test_a_plan_whose_result_type_changed_is_prepared_again(
    loaded: Loaded, postgres_url: str
) -> None:
    pg, memory, builder, _ = loaded
    entry_id = builder.path[-1].id
    for _ in range(6):
        await pg.get(entry_id)
    conninfo, schema, _ = split_postgres_url(postgres_url)
    async with await psycopg.AsyncConnection.connect(
        conninfo, autocommit=True, options=f"-c search_path={schema}"
    ) as other:
        # The cached plan returns text; now the column is varchar: PostgreSQL refuses
        # the plan ("cached plan must not change result type") rather than replan it.
        await other.execute("ALTER TABLE entries ALTER COLUMN body TYPE varchar")
    assert await pg.get(entry_id) == await memory.get(entry_id)


async def test_a_connection_killed_during_a_read_reads_again(
    loaded: Loaded, postgres_url: str
) -> None:
    pg, memory, builder, watched = loaded
    entry_id = builder.path[-1].id
    await pg.get(entry_id)
    conninfo, schema, _ = split_postgres_url(postgres_url)
    options = f"-c search_path={schema}"
    async with (
        await psycopg.AsyncConnection.connect(conninfo, options=options) as locker,
        await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as admin,
    ):
        # The read waits on the server behind this lock while its connection is killed.
        await locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
        read = asyncio.ensure_future(pg.get(entry_id))
        (victim,) = await wait_for_lock_waiters(admin, set())
        assert victim in watched.open_pids()  # the store's connection, reading
        await admin.execute("SELECT pg_terminate_backend(%s)", (victim,))
        # The read meets the dead connection and runs again on another one.
        await wait_for_lock_waiters(admin, set())
        await locker.rollback()
        try:
            got = await asyncio.wait_for(read, 30)  # a guard against a hang, not a timing
        except StoreError as exc:  # typed, never psycopg's own
            assert not isinstance(exc, psycopg.Error)
        else:
            assert got == await memory.get(entry_id)
    assert await pg.get(entry_id) == await memory.get(entry_id)
    assert victim not in watched.open_pids()


async def wait_for_lock_waiters(admin: psycopg.AsyncConnection[Any], pids: set[int]) -> set[int]:
    """The backends waiting on a lock, once one in ``pids`` (any when empty) does."""
    for _ in range(3000):
        rows = await (
            await admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
        ).fetchall()
        waiting = {pid for (pid,) in rows}
        if (pids & waiting) if pids else waiting:
            return waiting
        await asyncio.sleep(0.01)
    raise AssertionError(f"no backend waited on the lock ({pids or 'any'})")


LONG = 1500  # rows of a long read: more than any store should keep after it returns


async def test_a_long_read_is_not_kept_by_a_cursor(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The rows of a whole-branch read are the caller's: no cursor of the store holds its
    result (libpq's copy of every row) after the read returns, as one kept for the next
    read would until then."""
    cursors: list[psycopg.AsyncCursor[Any]] = []
    cursor = psycopg.AsyncConnection.cursor

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        made = cursor(self, *args, **kwargs)
        cursors.append(made)
        return made

    monkeypatch.setattr(psycopg.AsyncConnection, "cursor", recorded)
    entries = [
        make_message("s", f"m{n}", f"m{n - 1}" if n else None, "user", "hi", n) for n in range(LONG)
    ]
    async with await open_store(postgres_url) as pg:
        await pg.append_many(entries)
        assert await pg.leaf("s") == f"m{LONG - 1}"

        def held() -> list[int]:
            return [c.pgresult.ntuples for c in cursors if not c.closed and c.pgresult is not None]

        assert cursors  # the store's cursors are seen
        assert [e.id for e in await pg.entries("s")] == [e.id for e in entries]
        assert all(rows < LONG for rows in held()), held()
        assert await pg.leaf("s") == f"m{LONG - 1}"
