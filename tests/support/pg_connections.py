"""The PostgreSQL connections a store makes, and the one each statement runs on, seen at
psycopg's boundary rather than inside the store.

Tests that guard how many server connections a store uses (an open and its first reads
cost one; sequential reads keep to one; a connection the server dropped is replaced)
watch here, so moving a read to another connection object inside the store keeps them
green while making or using more connections turns them red::

    with watch_connections(monkeypatch) as watched:  # before the store is opened
        store = await open_store(postgres_url)
    await store.leaf("s")
    assert len(watched.made) == 1 and watched.ran_on[-1] == watched.made[0].info.backend_pid

Every connection the store, its pool or its error probe makes comes from
``psycopg.AsyncConnection.connect`` (psycopg_pool calls it on the class), and every
statement it sends goes through ``AsyncCursor.execute`` or ``executemany``, both patched
on the class for as long as ``monkeypatch`` lasts (the test). Connections the test makes
itself while watching are counted too: make them before, or with plain ``psycopg.connect``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

__all__ = ["Watched", "watch_connections"]


@dataclass
class Watched:
    """The connections made, in order, and the backend each statement ran on."""

    made: list[psycopg.AsyncConnection[Any]] = field(default_factory=list)
    ran_on: list[int] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)

    def open(self) -> list[psycopg.AsyncConnection[Any]]:
        """The connections made that are not closed yet."""
        return [conn for conn in self.made if not conn.closed]

    def open_pids(self) -> set[int]:
        return {int(conn.info.backend_pid) for conn in self.open()}

    def mark(self) -> int:
        return len(self.ran_on)

    def pids_since(self, mark: int) -> list[int]:
        """The backend of each statement run since ``mark``, in order."""
        return self.ran_on[mark:]


@contextmanager
def watch_connections(monkeypatch: pytest.MonkeyPatch) -> Iterator[Watched]:
    """Record every psycopg async connection made and statement sent from now on."""
    watched = Watched()
    connect = psycopg.AsyncConnection.connect.__func__  # type: ignore[attr-defined]

    async def recorded_connect(cls: Any, *args: Any, **kwargs: Any) -> Any:
        conn = await connect(cls, *args, **kwargs)
        watched.made.append(conn)
        return conn

    cursor = psycopg.AsyncCursor
    execute, executemany = cursor.execute, cursor.executemany

    def note(self: Any, query: Any) -> None:
        watched.ran_on.append(int(self.connection.info.backend_pid))
        watched.texts.append(query if isinstance(query, str) else repr(query))

    async def recorded_execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(self, query)
        return await execute(self, query, *args, **kwargs)

    async def recorded_executemany(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        note(self, query)
        return await executemany(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "connect", classmethod(recorded_connect))
    monkeypatch.setattr(cursor, "execute", recorded_execute)
    monkeypatch.setattr(cursor, "executemany", recorded_executemany)
    yield watched
