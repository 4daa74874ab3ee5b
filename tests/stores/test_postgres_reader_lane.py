"""PostgreSQL reads one after another keep to one server connection; reads at once use
more; a connection the server dropped is replaced; closing closes every connection.

Seen at psycopg's boundary (``support.pg_connections``: the connections made, the
backend each statement ran on), never inside the store.
"""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from support.pg_connections import watch_connections

from prism_om.stores import open_store
from prism_om.stores.postgres import split_postgres_url
from prism_om.testing.generate import make_message


async def waiting_on_a_lock(admin: psycopg.Connection[Any], count: int) -> None:
    """Until ``count`` other backends of this database wait on a lock."""
    for _ in range(3000):
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
            "AND datname = current_database()"
        ).fetchone()
        if row is not None and row[0] >= count:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {count} backends waited on the lock")


async def test_sequential_reads_keep_to_one_connection(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watch_connections(monkeypatch) as watched:
        store = await open_store(postgres_url)
    async with store:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        # Reads at once, held behind a lock until all have started: each on a
        # connection of its own, none waiting for another's.
        mark = watched.mark()
        conninfo, schema, _ = split_postgres_url(postgres_url)
        with (
            psycopg.connect(conninfo, options=f"-c search_path={schema}") as locker,
            psycopg.connect(conninfo, autocommit=True) as admin,
        ):
            locker.execute("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE")
            reads = [asyncio.ensure_future(store.get("a")) for _ in range(4)]
            await waiting_on_a_lock(admin, 4)
            locker.rollback()
        found = await asyncio.gather(*reads)
        assert all(entry is not None and entry.id == "a" for entry in found)
        assert len(set(watched.pids_since(mark))) == 4
        made = len(watched.made)
        # Then one after another: all on one connection, though several are idle now.
        mark = watched.mark()
        for _ in range(5):
            assert await store.leaf("s") == "a"
            assert (await store.page_messages("s", "a", 5))[0] == []
            assert (await store.get("a")) is not None
        ran_on = watched.pids_since(mark)
        assert len(ran_on) >= 15 and len(set(ran_on)) == 1, ran_on
        assert len(watched.made) == made  # and no new connection


async def test_a_connection_the_server_dropped_is_replaced(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watch_connections(monkeypatch) as watched:
        store = await open_store(postgres_url)
    async with store:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        assert await store.leaf("s") == "a"
        dropped = watched.open_pids()
        conninfo, _, _ = split_postgres_url(postgres_url)
        with psycopg.connect(conninfo, autocommit=True) as admin:
            for pid in dropped:
                admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
        # The read meets a dead connection, lets it go and reads again on a live one.
        mark = watched.mark()
        assert await store.leaf("s") == "a"
        assert await store.leaf("s") == "a"
        assert watched.pids_since(mark)[-1] not in dropped
        assert not watched.open_pids() & dropped


async def test_closing_closes_every_connection(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watch_connections(monkeypatch) as watched:
        store = await open_store(postgres_url)
    await store.append(make_message("s", "a", None, "user", "hello", 1))
    await asyncio.gather(*(store.leaf("s") for _ in range(3)))
    assert await store.leaf("s") == "a"
    assert len(watched.open()) >= 2
    await store.close()
    assert watched.open() == []
