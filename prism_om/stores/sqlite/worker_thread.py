"""One thread hop per public call: a whole read or write transaction on the connection's thread.

Each aiosqlite call is a hop to the connection's worker thread and back (~50-70 µs on a
loaded 2-core machine), and the adapter's reads and appends are written as several
statements each: a page of 20 made four hops, an append of one entry about ten. Here the
same code runs in ONE hop: the coroutine of the read (or of the write transaction) is
driven to its end on the worker thread, against ``DirectConnection``, whose calls run
the statement at once and return without suspending. The adapter code stays the one that
PostgreSQL shares; only where it runs changes.

A coroutine driven this way must never really wait (no ``asyncio.sleep``, no
``to_thread``): ``drive`` refuses one that tries, rather than blocking the thread.
"""

from __future__ import annotations

import builtins
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Iterable
from typing import Any, TypeVar

import aiosqlite

from ..sql.connection import Params
from .translate import BUSY_ATTEMPTS, BUSY_BACKOFF_S, translate_error
from .translate import _is_busy as is_busy

T = TypeVar("T")

__all__ = ["DirectConnection", "ThreadSlot", "drive", "fetch_direct", "on_thread"]


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, here and now."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a store call run on the connection's thread tried to wait")


async def on_thread(conn: aiosqlite.Connection, function: Callable[[sqlite3.Connection], T]) -> T:
    """``function(raw connection)`` on ``conn``'s worker thread: one hop.

    aiosqlite queues callables on its thread through ``_execute`` (its own execute and
    fetch calls are built on it); the raw connection is only ever touched there.
    """

    def call() -> T:
        return function(conn._conn)

    result: T = await conn._execute(call)  # type: ignore[no-untyped-call]
    return result


class _Done:
    """The cursor ``DirectConnection.execute`` returns: awaitable or ``async with``."""

    def __init__(self, rows: builtins.list[Any]) -> None:
        self._rows = rows

    def __await__(self) -> Generator[Any, None, _Done]:
        return self
        yield  # pragma: no cover - makes this a generator that never suspends

    async def fetchall(self) -> builtins.list[Any]:
        return self._rows

    async def __aenter__(self) -> _Done:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class DirectConnection:
    """The calls the adapter makes on an ``aiosqlite.Connection``, run at once on the raw
    ``sqlite3`` connection: valid only on that connection's own worker thread."""

    def __init__(self, raw: sqlite3.Connection) -> None:
        self.raw = raw

    @property
    def in_transaction(self) -> bool:
        return self.raw.in_transaction

    def execute(self, sql: str, params: Params = ()) -> _Done:
        return _Done(self.raw.execute(sql, params).fetchall())

    async def execute_fetchall(self, sql: str, params: Params = ()) -> builtins.list[Any]:
        return self.raw.execute(sql, params).fetchall()

    async def executemany(self, sql: str, rows: Iterable[Params]) -> None:
        self.raw.executemany(sql, rows)


def fetch_direct(raw: sqlite3.Connection, url: str, sql: str, params: Params) -> list[Any]:
    """All rows of one read, on the connection's thread: busy retried, errors translated.

    The wait between attempts blocks only the worker thread, never the event loop.
    """
    for attempt in range(1, BUSY_ATTEMPTS + 1):
        try:
            return raw.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            if not is_busy(exc) or attempt == BUSY_ATTEMPTS:
                raise translate_error(url, "read", exc) from exc
        time.sleep(BUSY_BACKOFF_S * attempt)
    raise AssertionError("unreachable")  # pragma: no cover


class ThreadSlot(threading.local):
    """The direct connection of the read running on this thread, if any."""

    conn: sqlite3.Connection | None = None
