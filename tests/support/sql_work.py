"""The SQL statements a block of public store calls runs, counted at the driver boundary.

Tests that guard a store's cost (a page is a few statements, an append does not grow with
the session) count here rather than inside the store, so that moving a read to another
connection or thread keeps them green while doing more work turns them red::

    with statements(monkeypatch) as traced:  # before the store is opened
        store = await SqliteStore.open(path)
    with traced.counting() as run:
        await store.page_messages("s", cursor, 20)
    assert run.count <= 3

SQLite: every connection a store opens comes from ``sqlite3.connect`` (aiosqlite's
connector in ``stores/sqlite/connect.py`` and the loop's own read connection in
``stores/sqlite/loop_reads.py`` both look it up on the module at call time), so patching
that one attribute sees them all. Each new connection gets a trace callback (it fires on the
connection's own thread, hence the lock), a progress handler that counts the virtual
machine's work (``Run.work``: one tick per ``WORK_TICK`` instructions, a measure of rows
visited that no statement count shows), and is made of ``_CountingConnection`` (the
``factory`` of ``sqlite3.connect``), whose ``execute`` cursors count the rows fetched from
them (``Run.rows``), that counts its ``close()`` (``Traced.open_connections``), and that
raises the errors ``Traced.fail_next`` arms from its next statements instead of running
them (a driver's answer, e.g. a busy file, with no private hook). Only connections opened
while patched are seen.

PostgreSQL (psycopg 3): every statement the store sends goes through
``AsyncCursor.execute`` or ``AsyncCursor.executemany`` (``AsyncConnection.execute`` makes
a cursor and calls the first), patched on the class. ``executemany`` counts one statement
per row of parameters, which is what the server runs. psycopg's own transaction control
(``conn.transaction()``'s BEGIN/COMMIT/SAVEPOINT) is sent without a cursor and is not seen.
``Run.rows`` counts what ``AsyncCursor.fetchall/fetchmany/fetchone`` hand back; ``work``
stays 0 and ``fail_next`` does not apply.

``Run.statements`` leaves out ``HOUSEKEEPING`` (transaction control and SQLite's
``PRAGMA data_version`` freshness check, which frame reads but read no rows) and trigger
sub-programs (SQLite traces them as ``-- TRIGGER ...``; they belong to the statement
that fired them); ``Run.everything`` keeps all. A statement retried after a busy answer is
counted each time it runs. Anything else running at the same time (a background task on
another store, another thread) is counted too: keep the counted block to the calls.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from prism_om.stores.sqlite.worker_thread import ThreadJob, ThreadWorkConnection

__all__ = ["HOUSEKEEPING", "WORK_TICK", "Run", "Traced", "statements"]

HOUSEKEEPING = (
    "BEGIN",
    "COMMIT",
    "END",
    "ROLLBACK",
    "SAVEPOINT",
    "RELEASE",
    "PRAGMA data_version",
)
"""Statement prefixes ``Run.statements`` leaves out (case-insensitive)."""

WORK_TICK = 100
"""SQLite virtual machine instructions per ``Run.work`` tick."""


def _housekeeping(sql: str) -> bool:
    text = sql.lstrip().upper()
    return text.startswith("--") or any(text.startswith(p.upper()) for p in HOUSEKEEPING)


class Traced:
    """Every statement run on the traced connections, in order, and the work they did."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._log: list[str] = []
        self._ticks = 0
        self._rows = 0
        self._failures: list[tuple[BaseException, str | None]] = []
        self.targets: list[str] = []
        self.connections = 0
        self.closed = 0

    def record(self, sql: str) -> None:
        with self._lock:
            self._log.append(sql)

    def tick(self) -> int:
        with self._lock:
            self._ticks += 1
        return 0  # never interrupt the statement

    def fetched(self, rows: int) -> None:
        with self._lock:
            self._rows += rows

    def opened(self, target: object) -> None:
        with self._lock:
            self.connections += 1
            self.targets.append(str(target))

    def closing(self) -> None:
        with self._lock:
            self.closed += 1

    @property
    def open_connections(self) -> int:
        """Connections opened while traced and not closed yet (by ``close()``)."""
        with self._lock:
            return self.connections - self.closed

    def fail_next(self, *errors: BaseException, matching: str | None = None) -> None:
        """The next SQLite statements run on any traced connection (only those whose text
        holds ``matching``, when given) raise ``errors``, one each, in order, instead of
        running."""
        with self._lock:
            self._failures.extend((error, matching) for error in errors)

    @property
    def failures_left(self) -> int:
        with self._lock:
            return len(self._failures)

    def take_failure(self, sql: str) -> BaseException | None:
        with self._lock:
            if not self._failures:
                return None
            error, needle = self._failures[0]
            if needle is not None and needle not in sql:
                return None
            del self._failures[0]
            return error

    def mark(self) -> tuple[int, int, int]:
        with self._lock:
            return len(self._log), self._ticks, self._rows

    def between(self, start: int, end: int | None) -> list[str]:
        with self._lock:
            return list(self._log[start:end])

    def ticks_since(self, start: int, end: int | None) -> int:
        with self._lock:
            return (self._ticks if end is None else end) - start

    def rows_since(self, start: int, end: int | None) -> int:
        with self._lock:
            return (self._rows if end is None else end) - start

    @contextmanager
    def counting(self) -> Iterator[Run]:
        """A ``Run`` of the statements run inside the block (live while inside)."""
        run = Run(self, *self.mark())
        try:
            yield run
        finally:
            run.end, run.end_ticks, run.end_rows = self.mark()


@dataclass
class Run:
    """The statements of one counted block."""

    traced: Traced
    start: int
    start_ticks: int
    start_rows: int
    end: int | None = None
    end_ticks: int | None = None
    end_rows: int | None = None

    @property
    def everything(self) -> list[str]:
        """Every statement, housekeeping and trigger sub-programs included."""
        return self.traced.between(self.start, self.end)

    @property
    def statements(self) -> list[str]:
        """The statements that read or write rows (``HOUSEKEEPING`` left out)."""
        return [sql for sql in self.everything if not _housekeeping(sql)]

    @property
    def count(self) -> int:
        return len(self.statements)

    @property
    def work(self) -> int:
        """SQLite virtual machine ticks (``WORK_TICK`` instructions each) of the block."""
        return self.traced.ticks_since(self.start_ticks, self.end_ticks)

    @property
    def rows(self) -> int:
        """Rows fetched from SQLite statements of the block (every connection)."""
        return self.traced.rows_since(self.start_rows, self.end_rows)

    def matching(self, needle: str) -> int:
        """How many of ``everything`` contain ``needle`` (case-sensitive)."""
        return sum(needle in sql for sql in self.everything)


@contextmanager
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[Traced]:
    """Trace every SQLite connection opened and every psycopg statement sent from now on.

    The patches last as long as ``monkeypatch`` (the test), not the ``with`` block: the
    block only says where the store must be opened.
    """
    traced = Traced()
    connect = sqlite3.connect

    def traced_connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        # The adapter asks for its ThreadWorkConnection: the counting class is one too.
        if kwargs.get("factory", sqlite3.Connection) in (sqlite3.Connection, ThreadWorkConnection):
            kwargs["factory"] = _CountingConnection
        raw: sqlite3.Connection = connect(*args, **kwargs)
        if isinstance(raw, _CountingConnection):
            raw.traced = traced
        traced.opened(args[0] if args else kwargs.get("database"))
        raw.set_trace_callback(traced.record)
        raw.set_progress_handler(traced.tick, WORK_TICK)
        return raw

    monkeypatch.setattr(sqlite3, "connect", traced_connect)
    _patch_psycopg(monkeypatch, traced)
    yield traced


class _CountingCursor(sqlite3.Cursor):
    """A cursor that reports the rows fetched from it to ``traced``."""

    traced: Traced | None = None

    def _count(self, rows: int) -> None:
        if self.traced is not None and rows:
            self.traced.fetched(rows)

    def fetchall(self) -> list[Any]:
        rows = super().fetchall()
        self._count(len(rows))
        return rows

    def fetchmany(self, size: int | None = None) -> list[Any]:
        rows = super().fetchmany(self.arraysize if size is None else size)
        self._count(len(rows))
        return rows

    def fetchone(self) -> Any:
        row = super().fetchone()
        self._count(row is not None)
        return row

    def __next__(self) -> Any:
        row = super().__next__()
        self._count(1)
        return row


class _CountingConnection(ThreadWorkConnection):
    """A connection whose ``execute`` cursors count their rows (``Run.rows``); a
    ``ThreadJob`` (the adapter's thread work, no SQL) runs as on the adapter's own."""

    traced: Traced | None = None

    def cursor(self, factory: Any = None) -> Any:
        cursor = super().cursor(factory or _CountingCursor)
        if isinstance(cursor, _CountingCursor):
            cursor.traced = self.traced
        return cursor

    def _fail(self, sql: str) -> None:
        failure = None if self.traced is None else self.traced.take_failure(sql)
        if failure is not None:
            raise failure

    def execute(self, sql: Any, parameters: Any = (), /) -> Any:
        if type(sql) is ThreadJob:
            return super().execute(sql, parameters)
        self._fail(sql)
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, parameters: Any, /) -> Any:
        self._fail(sql)
        return self.cursor().executemany(sql, parameters)

    def close(self) -> None:
        if self.traced is not None:
            self.traced.closing()
            self.traced = None  # a second close is not a second connection closed
        super().close()


def _patch_psycopg(monkeypatch: pytest.MonkeyPatch, traced: Traced) -> None:
    try:
        import psycopg
    except ImportError:  # no PostgreSQL driver: nothing of it to trace
        return
    cursor = psycopg.AsyncCursor
    execute, executemany = cursor.execute, cursor.executemany

    async def traced_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        traced.record(_text(query))
        return await execute(self, query, *args, **kwargs)

    async def traced_executemany(
        self: Any, query: Any, params_seq: Iterable[Any], *args: Any, **kwargs: Any
    ) -> Any:
        rows = list(params_seq)
        text = _text(query)
        for _ in rows:
            traced.record(text)
        return await executemany(self, query, rows, *args, **kwargs)

    fetchall, fetchmany, fetchone = cursor.fetchall, cursor.fetchmany, cursor.fetchone

    async def traced_fetchall(self: Any) -> Any:
        rows = await fetchall(self)
        traced.fetched(len(rows))
        return rows

    async def traced_fetchmany(self: Any, *args: Any, **kwargs: Any) -> Any:
        rows = await fetchmany(self, *args, **kwargs)
        traced.fetched(len(rows))
        return rows

    async def traced_fetchone(self: Any) -> Any:
        row = await fetchone(self)
        traced.fetched(row is not None)
        return row

    monkeypatch.setattr(cursor, "execute", traced_execute)
    monkeypatch.setattr(cursor, "executemany", traced_executemany)
    monkeypatch.setattr(cursor, "fetchall", traced_fetchall)
    monkeypatch.setattr(cursor, "fetchmany", traced_fetchmany)
    monkeypatch.setattr(cursor, "fetchone", traced_fetchone)


def _text(query: Any) -> str:
    if isinstance(query, bytes):
        return query.decode("utf-8", "replace")
    if isinstance(query, str):
        return query
    as_string = getattr(query, "as_string", None)
    if as_string is not None:
        try:
            return str(as_string(None))
        except Exception:  # a composed query that needs a connection to render
            pass
    return repr(query)
