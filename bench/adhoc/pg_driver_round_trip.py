"""One round trip of each PostgreSQL driver candidate: psycopg 3 (+ psycopg_pool) and asyncpg.

    python bench/adhoc/pg_driver_round_trip.py postgresql://user@/db?host=/socket/dir&port=5432

Prints the median of N ``SELECT 1`` round trips on one open connection (taken from a pool
for psycopg, as the store does), and of a primary-key ``SELECT`` of one text row. A script
that prints numbers, not a test.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from urllib.parse import parse_qsl, urlsplit

import asyncpg
from psycopg_pool import AsyncConnectionPool

N = 2000


async def timed(call: object, n: int = N) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await call()  # type: ignore[operator]
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


async def main(url: str) -> None:
    pool = AsyncConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": True}, open=False)
    await pool.open(wait=True)
    async with pool.connection() as conn:
        await conn.execute("CREATE TEMP TABLE rt (id TEXT PRIMARY KEY, body TEXT)")
        await conn.execute("INSERT INTO rt VALUES ('a', repeat('x', 400))")

        async def pg_one() -> None:
            await (await conn.execute("SELECT 1")).fetchall()

        async def pg_row() -> None:
            await (await conn.execute("SELECT body FROM rt WHERE id = %s", ("a",))).fetchall()

        one, row = await timed(pg_one), await timed(pg_row)
        print(f"psycopg 3  SELECT 1: {one:7.1f} us   pk row: {row:7.1f} us")

    async def pool_one() -> None:
        async with pool.connection() as c:
            await (await c.execute("SELECT 1")).fetchall()

    print(f"psycopg 3  pool checkout + SELECT 1: {await timed(pool_one):7.1f} us")
    await pool.close()

    parts = urlsplit(url)
    options = dict(parse_qsl(parts.query))
    conn2 = await asyncpg.connect(
        host=options.get("host", parts.hostname),
        port=int(options.get("port", parts.port or 5432)),
        user=parts.username,
        database=parts.path.lstrip("/"),
    )
    await conn2.execute("CREATE TEMP TABLE rt (id TEXT PRIMARY KEY, body TEXT)")
    await conn2.execute("INSERT INTO rt VALUES ('a', repeat('x', 400))")

    async def apg_one() -> None:
        await conn2.fetch("SELECT 1")

    async def apg_row() -> None:
        await conn2.fetch("SELECT body FROM rt WHERE id = $1", "a")

    one, row = await timed(apg_one), await timed(apg_row)
    print(f"asyncpg    SELECT 1: {one:7.1f} us   pk row: {row:7.1f} us")
    await conn2.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
