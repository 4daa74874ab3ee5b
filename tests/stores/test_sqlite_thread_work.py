"""The SQLite adapter's thread work goes through aiosqlite's public API only.

``worker_thread.on_thread`` hands a function to aiosqlite's ``execute_fetchall``, and the
raw connection's class (``ThreadWorkConnection``, made with ``sqlite3.connect``'s
documented ``factory``) runs it on the connection's thread; connections are built on a
daemon thread, so their worker threads are daemons. These tests pin that route: an
aiosqlite that stopped calling the raw connection's ``execute`` fails here.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import aiosqlite
import pytest

from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite.worker_thread import ThreadWorkConnection, new_connection, on_thread
from prism_om.testing.generate import make_message


async def test_a_function_runs_once_on_the_connections_own_thread(tmp_path: Path) -> None:
    threads: list[int] = []

    def connector() -> sqlite3.Connection:
        threads.append(threading.get_ident())
        return sqlite3.connect(tmp_path / "t.db", factory=ThreadWorkConnection)

    conn = new_connection(connector)
    await conn
    try:
        calls: list[int] = []

        def work(raw: sqlite3.Connection) -> list[tuple[int]]:
            calls.append(threading.get_ident())
            return raw.execute("SELECT 40 + 2").fetchall()

        assert await on_thread(conn, work) == [(42,)]
        assert calls == threads and threads[0] != threading.get_ident()
        # Ordinary SQL still runs as SQL on the same connection.
        assert await conn.execute_fetchall("SELECT ?", (7,)) == [(7,)]
    finally:
        await conn.close()


async def test_an_error_of_the_function_reaches_the_caller(tmp_path: Path) -> None:
    conn = new_connection(lambda: sqlite3.connect(tmp_path / "e.db", factory=ThreadWorkConnection))
    await conn
    try:

        def broken(raw: sqlite3.Connection) -> None:
            raw.execute("SELECT * FROM no_such_table")

        with pytest.raises(sqlite3.OperationalError, match="no_such_table"):
            await on_thread(conn, broken)
    finally:
        await conn.close()


async def test_a_connection_without_the_factory_fails_loudly(tmp_path: Path) -> None:
    """The control: a plain ``sqlite3.Connection`` cannot run a job, and says so (it is
    never silently parsed as empty SQL)."""
    conn = aiosqlite.Connection(lambda: sqlite3.connect(tmp_path / "p.db"), 64)
    await conn
    try:
        with pytest.raises((TypeError, ValueError)):
            await on_thread(conn, lambda raw: 1)
    finally:
        await conn.close()


async def test_store_threads_are_daemons(tmp_path: Path) -> None:
    before = set(threading.enumerate())
    store = await SqliteStore.open(tmp_path / "d.db")
    try:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        assert [e.id for e in await store.entries("s")] == ["a"]
        new = set(threading.enumerate()) - before
        assert new, "the store started no thread"
        assert all(t.daemon for t in new), [t for t in new if not t.daemon]
    finally:
        await store.close()


def test_a_store_left_open_does_not_keep_the_interpreter_alive(tmp_path: Path) -> None:
    """The control for the daemon rule: the same script exits, with the store kept in a
    global and never closed; without daemon threads it would wait forever."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from prism_om.stores.sqlite import SqliteStore
        from prism_om.testing.generate import make_message
        KEPT = []
        async def main():
            store = await SqliteStore.open({str(tmp_path / "leak.db")!r})
            await store.append(make_message("s", "a", None, "user", "hi", 1))
            await store.entries("s")
            KEPT.append(store)
        asyncio.run(main())
        print("done")
        """
    )
    run = subprocess.run(
        [sys.executable, "-W", "ignore", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "done"
