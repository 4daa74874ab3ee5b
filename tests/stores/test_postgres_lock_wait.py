"""A PostgreSQL call that waits for a lock on the server (a table another connection holds,
as a migration does; a session's advisory lock another writer holds) gives up after the
store's ``timeout_s`` with ``StoreBusyError`` instead of waiting forever, and the store is
usable again once the lock is gone."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from prism_om.entries import message_entry
from prism_om.errors import StoreBusyError
from prism_om.stores.postgres import PostgresStore, split_postgres_url


async def test_a_read_behind_a_held_table_lock_is_busy_not_stuck(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, timeout_s=1.0) as store:
        first = message_entry("s", "user", "hello")
        await store.append(first)
        conninfo, schema, _ = split_postgres_url(postgres_url)
        async with await psycopg.AsyncConnection.connect(
            conninfo, options=f"-c search_path={schema}"
        ) as locker:
            await locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
            # Bounded by the test too: without lock_timeout this read would hang.
            with pytest.raises(StoreBusyError, match="contention"):
                await asyncio.wait_for(store.entries("s"), timeout=20)
            await locker.rollback()
        assert await store.entries("s") == [first]


async def test_a_write_behind_a_held_session_lock_is_busy_not_stuck(postgres_url: str) -> None:
    async with await PostgresStore.open(postgres_url, timeout_s=1.0) as store:
        first = message_entry("s", "user", "hello")
        await store.append(first)
        conninfo, schema, _ = split_postgres_url(postgres_url)
        async with await psycopg.AsyncConnection.connect(
            conninfo, options=f"-c search_path={schema}"
        ) as locker:
            await locker.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("s",))
            second = message_entry("s", "assistant", "hi", parent_id=first.id)
            with pytest.raises(StoreBusyError):
                await asyncio.wait_for(store.append(second), timeout=20)
            await locker.rollback()
        assert await store.entries("s") == [first]
        await store.append(second)
        assert await store.entries("s") == [first, second]
