"""A PostgreSQL store analyzes its tables as the entries table doubles, counted from the
table's size at its last ANALYZE, not from what this store object appended.

A store reopened on a long session used to ANALYZE every table after its first 1,000
appended entries, whatever the table's size: an append paid a full ANALYZE of a table
that had grown by a fraction of a percent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql

from prism_om.entries import SessionEntry
from prism_om.stores import open_store
from prism_om.stores.postgres import split_postgres_url
from prism_om.testing.generate import make_message

BATCH = 100


@pytest.fixture
def analyzes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every ANALYZE statement the store sends."""
    sent: list[str] = []
    execute = psycopg.AsyncConnection.execute

    async def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        if str(query).startswith("ANALYZE"):
            sent.append(str(query))
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "execute", counted)
    yield sent


def messages(start: int, count: int) -> list[SessionEntry]:
    parent = f"m{start - 1}" if start else None
    out = []
    for n in range(start, start + count):
        out.append(make_message("s", f"m{n}", parent, "user", f"message {n}", n))
        parent = f"m{n}"
    return out


async def append(store: Any, entries: list[SessionEntry]) -> None:
    for i in range(0, len(entries), BATCH):
        await store.append_many(entries[i : i + BATCH])


async def test_a_store_reopened_on_a_long_table_waits_for_it_to_double(
    postgres_url: str, analyzes: list[str]
) -> None:
    async with await open_store(postgres_url) as store:
        await append(store, messages(0, 3000))
    # A fresh store analyzes as it fills the table: at 1,000 and 2,000 entries.
    assert len(analyzes) == 2
    # Then the table is analyzed at 3,000 rows (as autovacuum would, in its own time).
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("ANALYZE {}.entries").format(pgsql.Identifier(schema)))
    async with await open_store(postgres_url) as store:
        await append(store, messages(3000, 2900))
        assert len(analyzes) == 2, "2,900 more on a table analyzed at 3,000 rows"
        await append(store, messages(5900, 100))
        assert len(analyzes) == 3, "the table doubled since its last ANALYZE"
        assert len(await store.entries("s")) == 6000


async def test_a_store_on_a_never_analyzed_table_analyzes_after_its_first_appends(
    postgres_url: str, analyzes: list[str]
) -> None:
    async with await open_store(postgres_url) as store:
        await append(store, messages(0, 900))
    assert analyzes == []
    async with await open_store(postgres_url) as store:
        await append(store, messages(900, 1000))
        assert len(analyzes) == 1
