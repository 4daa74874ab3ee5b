"""The connection the shared SQL runs on: two methods, typed, and nothing else.

Every statement of ``stores.sql`` (and the row migration of ``stores/_rows.py``) runs
through these. aiosqlite's ``Connection`` has both as they are; the PostgreSQL adapter's
``PgConnection`` speaks them in the SQLite dialect through the transpiler, and its
``PoolReader`` has the read. A statement with no rows (a ``DELETE``) goes through
``execute_fetchall`` too, and gives back none: no cursor escapes a call, so no state
outlives it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

__all__ = ["Params", "SqlConnection", "SqlReader"]

# Bound values: positional (``?``) or named (``:name``).
Params = Sequence[Any] | Mapping[str, Any]


class SqlReader(Protocol):
    """What a read needs: one statement, all its rows."""

    async def execute_fetchall(self, sql: str, parameters: Params = (), /) -> Iterable[Any]:
        """Run ``sql`` with ``parameters``; every row it returns (none for a write)."""
        ...


class SqlConnection(SqlReader, Protocol):
    """What a write transaction needs besides: one statement over many rows of values."""

    async def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> object:
        """Run ``sql`` once per row of ``parameters``."""
        ...
