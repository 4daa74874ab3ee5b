"""The PostgreSQL read path at the wire: what each read sends, counted, never timed.

libpq's protocol trace (``PGconn.trace``) of the reader's kept connection shows every
message the client sends: a warm read is one round trip (one ``Sync``), prepared (only
``Bind``/``Execute``), with no ``BEGIN``, ``COMMIT`` or ``SET`` of its own, its results
in binary, on the cursor the reader keeps. A prepared statement the server lost, and a
connection killed while a read waits on the server, end in the right answer or a typed
error.
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

from prism_om.errors import StoreError
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.stores.postgres import split_postgres_url
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder

Loaded = tuple[SessionStore, MemoryStore, BranchBuilder]


@pytest.fixture
async def loaded(postgres_url: str) -> AsyncIterator[Loaded]:
    builder = random_builder(5, 80, forks=False)
    pg = await open_store(postgres_url)
    memory = MemoryStore()
    for store in (pg, memory):
        await load_builder(store, builder)
    try:
        yield pg, memory, builder
    finally:
        await pg.close()


def first_observation(builder: BranchBuilder) -> str:
    return next(
        o["id"]
        for e in builder.path
        if e.data is not None and e.data.get("type") == "om.observations.recorded"
        for o in e.data["observations"]
    )


def a_message(builder: BranchBuilder) -> str:
    return next(e.id for e in builder.path if e.kind == "message")


def lane(store: SessionStore) -> psycopg.AsyncConnection[Any]:
    conn = store._reader._lane  # type: ignore[attr-defined]
    assert conn is not None, "a read has taken the reader's kept connection"
    return conn  # type: ignore[no-any-return]


@contextlib.contextmanager
def traced(conn: psycopg.AsyncConnection[Any]) -> Iterator[list[tuple[str, str, str]]]:
    """(who, message, fields) for every protocol message on ``conn`` while inside: who
    is "F" (the client, frontend) or "B" (the server, backend)."""
    messages: list[tuple[str, str, str]] = []
    with tempfile.TemporaryFile("w+") as out:
        conn.pgconn.trace(out.fileno())
        conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
        try:
            yield messages
        finally:
            conn.pgconn.untrace()
            out.seek(0)
            for line in out.read().splitlines():
                if line[:2] not in ("F\t", "B\t"):
                    continue  # a value's own line break, inside the message before
                who, _, message, *fields = line.split("\t")
                messages.append((who, message, "\t".join(fields).strip()))


def sent(messages: list[tuple[str, str, str]], kind: str) -> int:
    return sum(1 for who, message, _ in messages if who == "F" and message == kind)


async def test_a_warm_read_is_one_round_trip_with_no_parse(loaded: Loaded) -> None:
    pg, memory, builder = loaded
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
            with traced(lane(pg)) as messages:
                got = await read(pg)
            assert got == await read(memory)
            assert sent(messages, "Sync") == 1, messages
            assert sent(messages, "Parse") == 0, messages  # prepared: Bind + Execute only
            assert sent(messages, "Query") == 0, messages  # no BEGIN, COMMIT or SET


async def test_reads_come_back_in_binary(loaded: Loaded) -> None:
    pg, memory, builder = loaded
    await pg.leaf("s1")
    entry_id = builder.path[-1].id
    with traced(lane(pg)) as messages:
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
    pg, _, builder = loaded
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
    pg, memory, builder = loaded
    entry_id = builder.path[-1].id
    for _ in range(6):  # prepared whatever psycopg's threshold
        await pg.get(entry_id)
    conn = lane(pg)
    # Behind psycopg's back, as a transaction-mode pooler or a DISCARD would.
    conn.pgconn.exec_(b"DEALLOCATE ALL")
    with traced(conn) as messages:
        assert await pg.get(entry_id) == await memory.get(entry_id)
    errors = [m for m in messages if m[0] == "B" and m[1] == "ErrorResponse"]
    assert len(errors) == 1 and "does not exist" in errors[0][2], "failed once, then read"
    assert lane(pg) is conn, "the connection itself was fine: kept"
    assert await pg.get(entry_id) == await memory.get(entry_id)


async def test_a_plan_whose_result_type_changed_is_prepared_again(
    loaded: Loaded, postgres_url: str
) -> None:
    pg, memory, builder = loaded
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
    pg, memory, builder = loaded
    entry_id = builder.path[-1].id
    await pg.get(entry_id)
    victim = lane(pg).info.backend_pid
    conninfo, schema, _ = split_postgres_url(postgres_url)
    options = f"-c search_path={schema}"
    async with (
        await psycopg.AsyncConnection.connect(conninfo, options=options) as locker,
        await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as admin,
    ):
        # The read waits on the server behind this lock while its connection is killed.
        await locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
        read = asyncio.ensure_future(pg.get(entry_id))
        await wait_for_lock_waiters(admin, {victim})
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
    assert lane(pg).info.backend_pid != victim


async def wait_for_lock_waiters(admin: psycopg.AsyncConnection[Any], pids: set[int]) -> None:
    """Until a backend in ``pids`` (any other backend when empty) waits on a lock."""
    for _ in range(3000):
        rows = await (
            await admin.execute(
                "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
        ).fetchall()
        waiting = {pid for (pid,) in rows}
        if (pids & waiting) if pids else waiting:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no backend waited on the lock ({pids or 'any'})")


async def test_a_long_read_is_not_kept_by_the_lanes_cursor(
    loaded: Loaded, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prism_om.stores.postgres import connection

    pg, memory, builder = loaded
    monkeypatch.setattr(connection, "KEPT_RESULT_ROWS", 5)
    await pg.leaf("s1")
    reader: Any = pg._reader  # type: ignore[attr-defined]
    kept = reader._lane_cursor
    assert await pg.leaf("s1") == await memory.leaf("s1")
    assert reader._lane_cursor is kept and kept.pgresult is not None
    assert len(builder.path) > 5
    assert await pg.entries("s1") == await memory.entries("s1")
    # The rows of the long read are the caller's; the cursor that held them is gone.
    assert kept.closed and kept.pgresult is None
    assert reader._lane_cursor is not kept and reader._lane_cursor.pgresult is None
    assert await pg.leaf("s1") == await memory.leaf("s1")
