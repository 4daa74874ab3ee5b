"""A PostgreSQL page, run again and again, is planned once per connection.

psycopg prepares a statement at its sixth run on a connection; the server then plans it
for its bound values five times and keeps the generic plan when that plan looks no
dearer. On one long session (the bench's shape: every entry on one segment) a page
whose ``LIMIT`` was a bound value never got there: the generic plan assumed a tenth of
each index range instead of the page, so every page was planned again (~200 µs of a
~400 µs page at 100k entries). Counted here with the server's own counters
(``pg_prepared_statements``) on every connection the store holds (found at psycopg's
boundary, ``support.pg_connections``), never with a clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql
from stores.test_postgres_one_statement_plans import LEAF, MESSAGE, S, plans
from stores.test_postgres_plans import filled, seq_scans
from support.pg_connections import Watched, watch_connections

from prism_om.errors import StoreError
from prism_om.stores import open_store
from prism_om.stores.postgres import split_postgres_url

__all__ = ["filled"]

LONG = 80_000  # entries of the one session, all on its root segment
RUNS = 20
# psycopg runs a statement unprepared five times, then prepared.
PREPARED_RUNS = RUNS - 5
CURSOR = f"e{LONG // 2}"

FILL = [
    f"""INSERT INTO sessions (session_id, seq, root_id, leaf_id, created_at)
    VALUES ('long', 1, 'e1', 'e{LONG}', '2026-01-01T00:00:00.000Z')""",
    """INSERT INTO segments (segment_id, session_id, parent_segment_id, start_depth)
    VALUES (1, 'long', NULL, 0)""",
    f"""INSERT INTO entries (seq, id, session_id, parent_id, kind, role, custom_type,
        timestamp, depth, segment_id, tokens, token_encoding, path_tokens, body)
    SELECT n, 'e' || n, 'long', CASE WHEN n > 1 THEN 'e' || (n - 1) END, 'message',
           CASE WHEN n % 2 = 0 THEN 'user' ELSE 'assistant' END, NULL,
           '2026-01-01T00:00:00.000Z', n - 1, 1, 5, 'x', 5 * n,
           '{{"role":"' || CASE WHEN n % 2 = 0 THEN 'user' ELSE 'assistant' END
           || '","content":"m' || n || '"}}'
    FROM generate_series(1, {LONG}) n""",
    "ANALYZE",
]


@pytest.fixture
async def long_session(postgres_url: str) -> str:
    async with await open_store(postgres_url):
        pass  # creates the schema
    conninfo, schema, _ = split_postgres_url(postgres_url)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(pgsql.SQL("SET search_path TO {}").format(pgsql.Identifier(schema)))
        for statement in FILL:
            conn.execute(statement)
    return postgres_url


async def plans_made(watched: Watched) -> list[tuple[str, int, int]]:
    """(statement, generic plans, custom plans) of the statements prepared on the store's
    open connections (each connection has its own)."""
    made = []
    for conn in watched.open():
        cursor = await conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
        )
        made += [(str(s), int(g), int(c)) for s, g, c in await cursor.fetchall()]
    return made


async def test_a_page_keeps_its_generic_plan_on_a_long_session(
    long_session: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with watch_connections(monkeypatch) as watched:
        store = await open_store(long_session)
    async with store:
        for direction in ("forward", "backward"):
            for _ in range(RUNS):
                page, more = await store.page_messages("long", CURSOR, 20, direction)
                assert len(page) == 20 and more
        pages = [p for p in await plans_made(watched) if "LATERAL" in p[0]]
    # One prepared page statement per direction (per connection that ran it); each
    # planned for its values only in the server's five trial runs, then run on its
    # generic plan: psycopg prepares at a statement's sixth run on a connection, the
    # server plans the first five runs of the prepared statement for their values.
    assert len(pages) >= 2, pages
    for _statement, _generic, custom in pages:
        assert custom <= 5, pages
    generic = sum(g for _, g, _ in pages)
    assert generic > 0 and generic >= 2 * RUNS - 10 * len(pages), pages


async def test_each_page_size_is_its_own_prepared_statement(long_session: str) -> None:
    """The limit is part of the statement text: pages of other sizes still answer right."""
    store = await open_store(long_session)
    async with store:
        for limit in (1, 7, 20, 100):
            for _ in range(7):
                page, more = await store.page_messages("long", CURSOR, limit)
                assert [e.id for e in page] == [
                    f"e{LONG // 2 + k}" for k in range(1, limit + 1)
                ] and more
            last, more = await store.page_messages("long", f"e{LONG - limit}", limit)
            assert len(last) == limit and not more


WAYS = [(way, leaf) for way in ("forward", "backward") for leaf in (None, LEAF)]


def test_the_pages_as_run_are_index_reads(
    filled: psycopg.Connection[Any], postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``test_postgres_one_statement_plans``'s check, on the statements the store sends
    for a page (caught at psycopg's boundary), custom and generic plan."""
    sent: dict[tuple[str, str | None], list[tuple[str, dict[str, Any]]]] = {}
    current: list[tuple[str, str | None]] = []
    execute = psycopg.AsyncCursor.execute

    async def caught(cursor: Any, query: Any, params: Any = None, **kwargs: Any) -> Any:
        if current and isinstance(query, str) and isinstance(params, dict):
            sent.setdefault(current[-1], []).append((query, dict(params)))
        return await execute(cursor, query, params, **kwargs)

    async def pages() -> None:
        async with await open_store(postgres_url, read_only=True) as store:
            for way, leaf in WAYS:
                current.append((way, leaf))
                # The filled rows are not real messages: the store may refuse them once
                # read; the statements it sent are what is checked.
                with contextlib.suppress(StoreError):
                    await store.page_messages(f"s{S}", MESSAGE, 20, way, leaf)  # type: ignore[arg-type]
                current.pop()

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", caught)
    asyncio.run(pages())
    assert sorted(sent, key=str) == sorted(WAYS, key=str)
    bad = {}
    for (way, leaf), statements in sent.items():
        assert any("LATERAL" in text for text, _ in statements), (way, leaf)  # the page
        for text, params in statements:
            assert "%(want)s" not in text  # the limit is written in
            for mode, plan in zip(("custom", "generic"), plans(filled, text, params), strict=True):
                if seq_scans(plan):
                    bad[f"page {way} at leaf {leaf} ({mode})"] = seq_scans(plan)
    assert bad == {}
