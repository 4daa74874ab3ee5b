"""psycopg at the adapter's boundary: an aiosqlite-shaped face, and errors translated.

The SQLite modules (placement, folds, reads) talk to a connection through
``execute_fetchall`` / ``execute`` / ``executemany`` with SQLite's SQL. ``PgConnection``
offers the same three calls over one psycopg connection and transpiles the SQL once per
text (``dialect.postgres_sql``), so those modules run unchanged on both engines.
"""

from __future__ import annotations

import builtins
import contextlib
import re
from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any, cast

import psycopg
import psycopg.errors
from psycopg import pq
from psycopg.types.numeric import Int8Dumper
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from ...errors import (
    CorruptStoreError,
    ReadOnlyStoreError,
    StoreBusyError,
    StoreError,
    StoreUnreachableError,
)
from ..sql.statements import (
    BRANCH_PIECES_SQL,
    LEAF_BY_ID_SQL,
    LEAF_BY_SESSION_SQL,
    RECENT_MESSAGES_SQL,
)
from .connect import pool_timeout_error
from .deadlines import ReadDeadlines
from .dialect import postgres_sql

__all__ = [
    "BOUNDED_READS",
    "PgConnection",
    "PoolReader",
    "configure_connection",
    "connection_lost",
    "drop_dead_connections",
    "translate_pg_error",
]

_NUMBERED = re.compile(r"\?\d")
# The adapter's reads (SQLite's SQL) whose work is bounded by their arguments: the leaf,
# the branch's pieces (one row per fork on the way), and a page of recent messages.
# ``PoolReader`` runs them, and the PostgreSQL-only page, recall and lookups by a few
# ids (``reads.py``), under a deadline (the store's ``timeout_s`` + 1 s); whole-branch
# and ledger reads, whose time grows with the session, are not cut.
BOUNDED_READS = frozenset(
    {
        # SqlReads.leaf's statement (tests/stores/test_postgres_read_timeout.py
        # checks that each of these reads runs under the timeout).
        "SELECT leaf_id FROM sessions WHERE session_id = ?",
        LEAF_BY_SESSION_SQL,
        LEAF_BY_ID_SQL,
        BRANCH_PIECES_SQL,
        RECENT_MESSAGES_SQL,
    }
)
# A bounded read ends at the store's timeout_s plus this (PoolReader.read_deadline_s).
READ_DEADLINE_MARGIN_S = 1.0
# Rows past which the lane's cursor is closed after a read rather than kept holding them.
KEPT_RESULT_ROWS = 1000


def _bind(sql: str, params: Any) -> tuple[str, Any]:
    return postgres_sql(sql), _bound(sql, params)


def _bound(sql: str, params: Any) -> Any:
    # Numbered placeholders became :pN (dialect.numbered_to_named): bind them by name.
    if _NUMBERED.search(sql) and not isinstance(params, Mapping):
        return {f"p{index}": value for index, value in enumerate(params, 1)}
    if not isinstance(params, Mapping):
        return builtins.list(params)
    return params


async def configure_connection(conn: psycopg.AsyncConnection[Any]) -> None:
    # Every integer goes as int8: psycopg would send a small one as int2, and a recursive
    # CTE whose first term takes a bound depth then disagrees with its bigint columns.
    conn.adapters.register_dumper(int, Int8Dumper)


class _Pending:
    """What ``PgConnection.execute`` returns: awaitable, or ``async with ... as cursor``."""

    def __init__(self, conn: PgConnection, sql: str, params: Any) -> None:
        self._conn, self._sql, self._params = conn, sql, params
        self._rows: builtins.list[Any] = []

    def __await__(self) -> Generator[Any, None, _Pending]:
        return self._run().__await__()

    async def _run(self) -> _Pending:
        self._rows = await self._conn.execute_fetchall(self._sql, self._params)
        return self

    async def fetchall(self) -> builtins.list[Any]:
        return self._rows

    async def __aenter__(self) -> _Pending:
        return await self._run()

    async def __aexit__(self, *exc: object) -> None:
        return None


class PgConnection:
    """One psycopg connection, spoken to in the SQLite adapter's SQL."""

    def __init__(self, raw: psycopg.AsyncConnection[Any]) -> None:
        self.raw = raw

    async def execute_fetchall(self, sql: str, params: Any = ()) -> builtins.list[Any]:
        text, bound = _bind(sql, params)
        async with self.raw.cursor() as cursor:
            await cursor.execute(text, bound)
            return await cursor.fetchall() if _has_rows(cursor) else []

    async def fetch_native(self, sql: str, params: Sequence[Any] = ()) -> builtins.list[Any]:
        """Rows of a statement written for PostgreSQL only (see ``store``): not transpiled."""
        async with self.raw.cursor() as cursor:
            await cursor.execute(cast(Any, sql), params)
            return await cursor.fetchall() if _has_rows(cursor) else []

    def execute(self, sql: str, params: Any = ()) -> _Pending:
        return _Pending(self, sql, params)

    async def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        text = postgres_sql(sql)
        async with self.raw.cursor() as cursor:
            await cursor.executemany(text, builtins.list(rows))


class PoolReader:
    """Reads for ``SqlReads._fetch``: one statement each, errors translated.

    A read runs on the reader's own connection (the lane: the open's connection, then
    one taken from the pool once and kept) when no other read is using it, else on a
    pooled connection: a pool checkout and return cost about a third of a round trip,
    paid now only by concurrent reads.
    The lane keeps one cursor too, with binary results (together 10-50 µs less per page
    or recall than a new text cursor per read: docs/benchmarks.md, findings). A
    lane that fails or whose read is interrupted goes back to the pool, which checks it
    (the open's connection is closed instead), and the next read takes a fresh one.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool[Any],
        url: str,
        lane: psycopg.AsyncConnection[Any] | None = None,
    ) -> None:
        self.pool = pool
        self.url = url
        # Each bounded read (BOUNDED_READS) ends by then: the store's timeout_s (the
        # pool's wait for a connection, and the server's lock_timeout) plus a second, so
        # that a lock wait ends with the server's own error first.
        self.read_deadline_s = float(pool.timeout) + READ_DEADLINE_MARGIN_S
        self._deadlines = ReadDeadlines(self.read_deadline_s)
        # ``lane``: the open's own connection (connect.first_connection), the first lane:
        # the store then opens with one connection, not one for the schema check and
        # another for its reads. Not the pool's, so it is closed when given back.
        self._lane = lane
        self._lane_cursor = lane.cursor(binary=True) if lane is not None else None
        self._lane_owned = lane is not None
        self._lane_busy = False
        self._closed = False

    async def execute_fetchall(self, sql: str, params: Any = ()) -> builtins.list[Any]:
        return await self._read(postgres_sql(sql), _bound(sql, params), sql in BOUNDED_READS)

    async def fetch_native(
        self, sql: str, params: Any = (), *, bounded: bool = False
    ) -> builtins.list[Any]:
        """Rows of a statement written for PostgreSQL (``%(name)s`` style): not transpiled.
        ``bounded``: its work is bounded by its arguments, so it runs under the deadline."""
        return await self._read(sql, params, bounded)

    async def close(self) -> None:
        """Give the lane back to the pool (before the pool closes); a read using it
        gives it back when it ends."""
        self._closed = True
        self._deadlines.close()
        if not self._lane_busy:
            await self._give_back_lane()

    async def _give_back_lane(self) -> None:
        lane, self._lane = self._lane, None
        cursor, self._lane_cursor = self._lane_cursor, None
        if cursor is not None:
            await cursor.close()
        owned, self._lane_owned = self._lane_owned, False
        if lane is not None and owned:
            with contextlib.suppress(psycopg.Error):
                await lane.close()
        elif lane is not None:
            with contextlib.suppress(psycopg.Error, PoolTimeout):
                await self.pool.putconn(lane)

    async def _read(self, text: str, params: Any, bounded: bool) -> builtins.list[Any]:
        if not bounded:
            return await self._read_unbounded(text, params)
        # A read that costs a page or a few rows has no reason to take timeout_s: past
        # it the server or the network is stuck (lock waits end at lock_timeout already),
        # and the read is cancelled (psycopg asks the server to cancel it, and closes the
        # connection if the server does not answer that within 5 s) instead of hanging.
        try:
            return await self._deadlines.run(self._read_unbounded(text, params))
        except TimeoutError as exc:
            raise StoreBusyError(
                f"read on {self.url}: no answer from the server within {self.read_deadline_s:g} s",
                url=self.url,
            ) from exc

    async def _read_unbounded(self, text: str, params: Any) -> builtins.list[Any]:
        try:
            if not self._lane_busy:
                rows = await self._on_lane(text, params)
                if rows is not None:
                    return rows
            try:
                async with self.pool.connection() as raw:
                    return await _fetch(raw, text, params)
            except psycopg.OperationalError as exc:
                if not connection_lost(exc):
                    raise
                # A connection the server dropped (a restart): the pool finds the others
                # that died with it, and the read, which changes nothing, runs once more.
                await drop_dead_connections(self.pool)
                async with self.pool.connection() as raw:
                    return await _fetch(raw, text, params)
        except PoolTimeout as exc:
            raise await pool_timeout_error(self.pool, self.url, "read", exc) from exc
        except psycopg.Error as exc:
            raise translate_pg_error(self.url, "read", exc) from exc

    async def _on_lane(self, text: str, params: Any) -> builtins.list[Any] | None:
        """The rows read on the lane; None when the lane failed (the caller reads again)."""
        self._lane_busy = True
        try:
            if self._lane is None:
                self._lane = await self.pool.getconn()
                self._lane_cursor = self._lane.cursor(binary=True)
            try:
                rows = await _fetch(self._lane, text, params, self._lane_cursor)
                if len(rows) > KEPT_RESULT_ROWS and self._lane_cursor is not None:
                    # A kept cursor holds its last result (libpq's copy of every row)
                    # until the next read: after a long one (a whole branch), let go.
                    await self._lane_cursor.close()
                    self._lane_cursor = self._lane.cursor(binary=True)
                return rows
            except BaseException as exc:
                await self._give_back_lane()
                if isinstance(exc, psycopg.OperationalError) and connection_lost(exc):
                    return None
                raise
        finally:
            self._lane_busy = False
            if self._closed:
                await self._give_back_lane()


async def _fetch(
    raw: psycopg.AsyncConnection[Any],
    text: str,
    params: Any,
    cursor: psycopg.AsyncCursor[Any] | None = None,
) -> builtins.list[Any]:
    """The rows of one read, results in binary (integers need no text parse).

    psycopg prepares a statement at its sixth run on a connection. A prepared statement
    the server no longer holds (a pooler in between, ``DEALLOCATE`` behind psycopg's
    back, a column whose type changed) fails; psycopg would keep sending it. A
    ``DEALLOCATE ALL`` through psycopg makes both sides forget every statement, and the
    read, which changes nothing, runs once more (prepared again at its sixth run).
    """
    try:
        return await _rows(raw, text, params, cursor)
    except (psycopg.errors.InvalidSqlStatementName, psycopg.errors.FeatureNotSupported) as exc:
        if not _stale_prepared(exc):
            raise
    await raw.execute("DEALLOCATE ALL")
    return await _rows(raw, text, params, cursor)


async def _rows(
    raw: psycopg.AsyncConnection[Any],
    text: str,
    params: Any,
    cursor: psycopg.AsyncCursor[Any] | None,
) -> builtins.list[Any]:
    if cursor is None:
        async with raw.cursor(binary=True) as fresh:
            return await _rows(raw, text, params, fresh)
    await cursor.execute(cast(Any, text), params)
    return await cursor.fetchall() if _has_rows(cursor) else []


# SQLSTATEs of a connection the server ended (pg_terminate_backend, a shutdown or a
# crash, not accepting connections yet); a client-side loss has no SQLSTATE at all.
_ENDED_BY_SERVER = frozenset({"57P01", "57P02", "57P03"})


def connection_lost(exc: psycopg.OperationalError) -> bool:
    """Whether the connection is gone (the read may run again on another one), as opposed
    to an answer on a live connection that psycopg also files as operational: a lock
    timeout, a cancelled statement (``QueryCanceled``), a deadlock."""
    state = exc.sqlstate
    return state is None or state.startswith("08") or state in _ENDED_BY_SERVER


def _has_rows(cursor: psycopg.AsyncCursor[Any]) -> bool:
    """Whether the statement returned rows. ``cursor.description`` says so too, but
    builds a ``Column`` per result column on every call (~10 µs for a recall's nine)."""
    result = cursor.pgresult
    return result is not None and result.status == pq.ExecStatus.TUPLES_OK


def _stale_prepared(exc: psycopg.Error) -> bool:
    # 26000: the named statement is gone; 0A000 "cached plan must not change result
    # type": a table it reads changed under it.
    if isinstance(exc, psycopg.errors.InvalidSqlStatementName):
        return True
    return "cached plan must not change result type" in str(exc)


async def drop_dead_connections(pool: AsyncConnectionPool[Any]) -> None:
    """Replace the pool's idle connections that no longer answer (checked once each)."""
    with contextlib.suppress(psycopg.Error, PoolTimeout):
        await pool.check()


_BUSY = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.LockNotAvailable,
    psycopg.errors.QueryCanceled,
)
_CORRUPT = (psycopg.errors.DataCorrupted, psycopg.errors.IndexCorrupted)


def translate_pg_error(url: str, action: str, exc: BaseException) -> StoreError:
    """The prism_om error for a psycopg (or pool) error; the caller chains it with ``from``."""
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if isinstance(exc, PoolTimeout):
        return StoreBusyError(
            f"{action} on {url}: no server connection came free in time ({text})", url=url
        )
    if isinstance(exc, _BUSY):
        return StoreBusyError(
            f"{action} on {url}: the server reported contention ({text})", url=url
        )
    if isinstance(exc, _CORRUPT):
        return CorruptStoreError(f"{action} on {url}: the server reports damage ({text})", url=url)
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return ReadOnlyStoreError(f"{action} on {url}: the connection is read-only", url=url)
    if isinstance(exc, psycopg.OperationalError):
        return StoreUnreachableError(
            f"{action} on {url}: the server is unreachable ({text})", url=url
        )
    return StoreError(f"{action} on {url} failed: {text}", url=url)
