"""PostgreSQL reads run on the reader's kept connection when it is free, with no pool
checkout; concurrent reads use the pool; a lane the server dropped is replaced."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg

from prism_om.stores import open_store
from prism_om.stores.postgres import split_postgres_url
from prism_om.testing.generate import make_message


async def test_sequential_reads_take_no_pool_connection(postgres_url: str) -> None:
    async with await open_store(postgres_url) as store:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        pool: Any = store._pool  # type: ignore[attr-defined]
        await store.leaf("s")  # the first read takes the lane from the pool
        checkouts = 0
        connection = pool.connection

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal checkouts
            checkouts += 1
            return connection(*args, **kwargs)

        pool.connection = counted
        for _ in range(5):
            assert await store.leaf("s") == "a"
            assert (await store.page_messages("s", "a", 5))[0] == []
            assert (await store.get("a")) is not None
        assert checkouts == 0
        # Reads at once: one on the lane, the others on pooled connections.
        found = await asyncio.gather(*(store.get("a") for _ in range(4)))
        assert all(entry is not None and entry.id == "a" for entry in found)
        assert checkouts == 3


async def test_a_lane_the_server_dropped_is_replaced(postgres_url: str) -> None:
    async with await open_store(postgres_url) as store:
        await store.append(make_message("s", "a", None, "user", "hello", 1))
        await store.leaf("s")
        lane = store._reader._lane  # type: ignore[attr-defined]
        assert lane is not None
        pid = lane.info.backend_pid
        conninfo, _, _ = split_postgres_url(postgres_url)
        with psycopg.connect(conninfo, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        # The read meets the dead lane, gives it back and reads again.
        assert await store.leaf("s") == "a"
        assert await store.leaf("s") == "a"
        fresh = store._reader._lane  # type: ignore[attr-defined]
        assert fresh is not None and fresh.info.backend_pid != pid


async def test_closing_gives_the_lane_back(postgres_url: str) -> None:
    store = await open_store(postgres_url)
    await store.append(make_message("s", "a", None, "user", "hello", 1))
    await store.leaf("s")
    reader: Any = store._reader  # type: ignore[attr-defined]
    assert reader._lane is not None
    await store.close()
    assert reader._lane is None
