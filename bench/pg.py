"""The PostgreSQL floor (psycopg on the same rows) and the psycopg round trip.

The server is a throwaway cluster (``prism_om.testing.postgres_cluster``, the one the
tests start), or ``PRISM_TEST_POSTGRES_URL`` when set. The floor table holds what our
adapter must at least write per entry (id, session, parent, kind, timestamp, token count,
payload JSON body: the row shape of schema version 4)
with an identity ``seq`` and an index on ``(session_id, seq)``; its appends include
encoding the rows and its reads ``json.loads`` of the bodies, as in ``floor.py``. Each
runs in its own schema of the same database, over one open ``AsyncConnection``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, nullcontext
from typing import Any

from prism_om.entries import SessionEntry

from .data import SESSION_ID, Dataset
from .floor import _rows
from .model import PG_FLOOR, PG_REFERENCE, Result
from .paired import RoundTrip
from .timing import Timer, time_calls
from .workloads import AppendSample

__all__ = ["postgres_server", "psycopg_round_trips", "run_pg_floor"]

_SCHEMA = """
CREATE TABLE entries (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    session_id TEXT NOT NULL,
    parent_id TEXT,
    kind TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX entries_session_seq ON entries (session_id, seq)"""
_INSERT = (
    "INSERT INTO entries (id, session_id, parent_id, kind, timestamp, tokens, body) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s)"
)
_COLUMNS = "id, session_id, parent_id, kind, timestamp, body"


@contextmanager
def postgres_server() -> Iterator[str]:
    """The base URL of a server for the run: the variable's, or a throwaway cluster."""
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        yield os.environ["PRISM_TEST_POSTGRES_URL"]
        return
    from prism_om.testing.postgres_cluster import throwaway_cluster

    with throwaway_cluster() as url:
        yield url


async def _connect(url: str) -> Any:
    import psycopg

    from prism_om.stores.postgres import split_postgres_url

    conninfo, schema, _ = split_postgres_url(url)
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=True)
    await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    await conn.execute(f'SET search_path TO "{schema}"')
    await conn.set_autocommit(False)
    return conn


@asynccontextmanager
async def psycopg_round_trips(url: str) -> AsyncIterator[list[RoundTrip]]:
    """One ``SELECT 1`` and its fetch on an open psycopg ``AsyncConnection``, for the
    PostgreSQL recall and page to be paired with round by round (``bench.paired``)."""
    conn = await _connect(url)
    await conn.set_autocommit(True)

    async def select_one() -> object:
        cur = await conn.execute("SELECT 1")
        return await cur.fetchall()

    try:
        yield [RoundTrip(PG_REFERENCE, select_one, nullcontext, "execute('SELECT 1') + fetchall")]
    finally:
        await conn.close()


async def run_pg_floor(
    url: str, dataset: Dataset, sample: AppendSample, timer: Timer
) -> list[Result]:
    """Every floor workload at one size, in the schema ``url`` names."""
    size = dataset.size
    conn = await _connect(url)
    results: list[Result] = []

    def add(workload: str, samples: list[float], note: str = "") -> None:
        results.append(Result(workload, PG_FLOOR, size, samples, note=note))

    try:
        async with conn.cursor() as cur:
            await cur.execute("DROP TABLE IF EXISTS entries")
            for statement in _SCHEMA.split(";"):
                await cur.execute(statement)
            for i in range(0, size, 10_000):
                await cur.executemany(_INSERT, _rows(dataset.entries[i : i + 10_000]))
            await cur.execute("ANALYZE entries")
        await conn.commit()
        await conn.set_autocommit(True)

        async def fetch(query: str, params: tuple[Any, ...]) -> list[Any]:
            cur = await conn.execute(query, params)
            return [(*row[:5], json.loads(row[5])) for row in await cur.fetchall()]

        cursor = dataset.middle_message_id()
        _, source_id = dataset.middle_memory_id()

        async def branch() -> list[Any]:
            return await fetch(
                f"SELECT {_COLUMNS} FROM entries WHERE session_id = %s ORDER BY seq",
                (SESSION_ID,),
            )

        async def page() -> list[Any]:
            return await fetch(
                f"SELECT {_COLUMNS} FROM entries WHERE session_id = %s AND seq > "
                "(SELECT seq FROM entries WHERE id = %s) ORDER BY seq LIMIT 21",
                (SESSION_ID, cursor),
            )

        async def lookup() -> list[Any]:
            return await fetch(f"SELECT {_COLUMNS} FROM entries WHERE id = %s", (source_id,))

        add("branch", await timer.measure(branch), note="SELECT + json.loads")
        add("page20", await timer.measure(page), note="indexed seq range LIMIT 21 + json.loads")
        results.append(
            Result("page20_raw", PG_FLOOR, size, results[-1].samples, note=results[-1].note)
        )
        add("recall", await timer.measure(lookup), note="unique-index lookup + json.loads")
        await conn.set_autocommit(False)

        def batch_call(entries: list[SessionEntry]) -> Any:
            async def call() -> None:
                async with conn.cursor() as cur:
                    await cur.executemany(_INSERT, _rows(entries))
                await conn.commit()

            return call

        def single_call(entry: SessionEntry) -> Any:
            async def call() -> None:
                await conn.execute(_INSERT, _rows([entry])[0])
                await conn.commit()

            return call

        samples, _ = await time_calls([batch_call(b) for b in sample.batches], groups=timer.repeat)
        add("append_batch", samples, note="encode + executemany + commit")
        samples, _ = await time_calls([single_call(e) for e in sample.singles], groups=timer.repeat)
        add("append_single", samples, note="encode + insert + commit")
    finally:
        await conn.close()
    return results
