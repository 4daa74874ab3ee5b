"""One thread hop per public call: a whole read or write transaction on the connection's thread.

Each aiosqlite call is a hop to the connection's worker thread and back (~25-70 us on a
2-core machine, depending on where the scheduler puts the thread), and the adapter's reads
and appends are written as several statements each: a write transaction of eight
statements made eight hops through aiosqlite's ``execute_fetchall`` (561-783 us), where
one hop of the whole transaction takes 81-100 us (``docs/design.md``, "SQLite's thread
work"). Here the same code runs in ONE hop: the coroutine of the read (or of the write
transaction) is driven to its end on the worker thread, against ``DirectConnection``,
whose calls run the statement at once and return without suspending. The adapter code
stays the one that PostgreSQL shares; only where it runs changes.

How a function reaches the thread, through aiosqlite's public API only: every adapter
connection is made with ``factory=ThreadWorkConnection`` (a documented ``sqlite3.connect``
argument), whose ``execute`` runs a ``ThreadJob`` instead of parsing it; ``on_thread``
hands one to aiosqlite's ``execute_fetchall``, which calls the raw connection's
``execute(...).fetchall()`` on its thread. ``tests/stores/test_sqlite_thread_work.py``
pins that route, so an aiosqlite that changed it fails there, loudly, not in a read.

aiosqlite's worker thread is a daemon when the ``aiosqlite.Connection`` is built on a
daemon thread (``threading``: the flag is inherited from the creating thread), so
``new_connection`` builds connections on one daemon thread of the process: a store its
caller forgot to close does not keep the interpreter from exiting (killing the thread at
exit is as safe as a crash, which WAL survives).

A coroutine driven this way must never really wait (no ``asyncio.sleep``, no
``to_thread``): ``drive`` refuses one that tries, rather than blocking the thread.
"""

from __future__ import annotations

import builtins
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Coroutine, Generator, Iterable
from concurrent.futures import Future
from typing import Any, Generic, TypeVar, cast

import aiosqlite

from ..sql.connection import Params
from .translate import BUSY_ATTEMPTS, BUSY_BACKOFF_S, translate_error
from .translate import _is_busy as is_busy

T = TypeVar("T")

__all__ = [
    "DirectConnection",
    "ThreadJob",
    "ThreadSlot",
    "ThreadWorkConnection",
    "drive",
    "fetch_direct",
    "new_connection",
    "on_thread",
]

# The raw ``execute``, called past ``ThreadWorkConnection``'s check where the text is SQL.
_EXECUTE = sqlite3.Connection.execute


def drive(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never suspends to its end, here and now."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a store call run on the connection's thread tried to wait")


class ThreadJob(Generic[T]):
    """A function for a connection's own thread, passed where aiosqlite passes SQL."""

    __slots__ = ("function", "result")

    def __init__(self, function: Callable[[sqlite3.Connection], T]) -> None:
        self.function = function

    def run(self, raw: sqlite3.Connection) -> ThreadJob[T]:
        self.result = self.function(raw)
        return self

    def fetchall(self) -> T:
        """What ``execute_fetchall`` returns: the function's result."""
        return self.result


class ThreadWorkConnection(sqlite3.Connection):
    """The ``sqlite3`` connection class of the adapter's aiosqlite connections: SQL runs
    as on any connection; a ``ThreadJob`` runs its function here, on this thread."""

    def execute(self, sql: Any, parameters: Any = (), /) -> Any:
        if type(sql) is ThreadJob:
            return sql.run(self)
        return _EXECUTE(self, sql, parameters)


async def on_thread(conn: aiosqlite.Connection, function: Callable[[sqlite3.Connection], T]) -> T:
    """``function(raw connection)`` on ``conn``'s worker thread: one hop.

    ``conn`` must have been made by ``new_connection`` (its raw connection a
    ``ThreadWorkConnection``); the raw connection is only ever touched on its thread.
    """
    rows = await conn.execute_fetchall(cast(str, ThreadJob(function)))
    return cast(T, rows)


_builds: queue.SimpleQueue[tuple[Future[Any], Callable[[], Any]]] = queue.SimpleQueue()
_builder: threading.Thread | None = None
_builder_lock = threading.Lock()


def _build_forever() -> None:
    while True:
        done, build = _builds.get()
        try:
            done.set_result(build())
        except BaseException as exc:  # handed to the caller, which raises it
            done.set_exception(exc)
        # Holding nothing between builds: the connection is its store's alone.
        del done, build


def new_connection(connector: Callable[[], sqlite3.Connection]) -> aiosqlite.Connection:
    """An unstarted aiosqlite connection whose worker thread will be a daemon: built on
    the process's daemon builder thread (one short hop; the builder starts once)."""
    global _builder
    with _builder_lock:
        if _builder is None or not _builder.is_alive():
            _builder = threading.Thread(
                target=_build_forever, name="prism-om-sqlite-builder", daemon=True
            )
            _builder.start()
    done: Future[aiosqlite.Connection] = Future()
    _builds.put((done, lambda: aiosqlite.Connection(connector, 64)))
    return done.result()


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
