"""A PostgreSQL recall and page taken apart with timestamps, and the driver levers A/B.

    python bench/adhoc/pg_driver_parts.py [--sizes 10000,100000] [--rounds 7] [--calls 200]

Starts a throwaway cluster (or uses ``PRISM_TEST_POSTGRES_URL``) and loads the bench
transcript into a store per size. Then, per size:

1. **Parts.** Each public recall / page is timed with timestamps taken inside it (the
   reader's ``_fetch`` is wrapped): before the statement (recall/page logic, reader),
   ``cursor.execute`` (send, server, receive), ``fetchall`` (row decode), the store's
   work after the rows (entry parse, ledger/page assembly), and the logic after the
   store call. The server's own time is ``EXPLAIN (ANALYZE, TIMING OFF)`` of the same
   statement with the same parameters, custom and generic plan; the pool checkout a
   bare ``async with pool.connection()``.
2. **Levers, interleaved.** The page and the recall statement run on connections set up
   each way a driver lever can go (prepared or not, binary or text results, a kept or a
   new cursor, a kept connection or a pool checkout, autocommit or a transaction per
   read, a ``SET`` per checkout), one round each in turn after one ``SELECT 1`` round
   trip; medians over rounds of per-round medians, ratios to that round's round trip.

A script that prints numbers, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import psycopg

from bench.data import SESSION_ID, build_dataset
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import open_store
from prism_om.stores.postgres import connection as pg_connection
from prism_om.stores.postgres.connection import configure_connection
from prism_om.stores.postgres.reads import MEMORY_SUBSET_SQL, PAGE_SQL
from prism_om.testing.postgres_cluster import throwaway_cluster, with_fresh_schema

Call = Callable[[], Awaitable[Any]]


async def median_us(call: Call, n: int) -> float:
    samples = []
    for _ in range(n):
        started = time.perf_counter_ns()
        await call()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


# -- 1. parts ---------------------------------------------------------------------------

MARKS: dict[str, int] = {}
ORIGINAL_FETCH = pg_connection._fetch


def instrument() -> None:
    """Wrap the reader's fetch and the store calls so that one call leaves timestamps."""
    fetch = pg_connection._fetch

    async def timed_fetch(raw: Any, text: str, params: Any, cursor: Any = None) -> list[Any]:
        # The store's own read (connection._fetch: the lane's kept cursor, prepared),
        # with a timestamp between execute and fetchall.
        MARKS["fetch_in"] = time.perf_counter_ns()
        kept = cursor or raw.cursor()
        await kept.execute(text, params, prepare=True)
        MARKS["executed"] = time.perf_counter_ns()
        rows = await kept.fetchall() if kept.description else []
        MARKS["fetched"] = time.perf_counter_ns()
        if cursor is None:
            await kept.close()
        return rows

    assert fetch is not None
    pg_connection._fetch = timed_fetch  # type: ignore[assignment]


async def parts(store: Any, name: str, public: Call, store_call: str, n: int) -> dict[str, float]:
    method = getattr(store, store_call)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        MARKS["store_in"] = time.perf_counter_ns()
        try:
            return await method(*args, **kwargs)
        finally:
            MARKS["store_out"] = time.perf_counter_ns()

    setattr(store, store_call, wrapped)
    spans: dict[str, list[float]] = {}
    try:
        for _ in range(n):
            MARKS.clear()
            start = time.perf_counter_ns()
            await public()
            end = time.perf_counter_ns()
            m = MARKS
            for key, (a, b) in {
                "logic before the store call": (start, m["store_in"]),
                "store, before the statement": (m["store_in"], m["fetch_in"]),
                "cursor.execute (send+server+recv)": (m["fetch_in"], m["executed"]),
                "fetchall (row decode)": (m["executed"], m["fetched"]),
                "store, after rows (parse+assemble)": (m["fetched"], m["store_out"]),
                "logic after the store call": (m["store_out"], end),
                "total": (start, end),
            }.items():
                spans.setdefault(key, []).append((b - a) / 1000)
    finally:
        delattr(store, store_call)
    return {key: statistics.median(values) for key, values in spans.items()}


async def server_times(conn: Any, sql: str, params: Any, n: int = 30) -> dict[str, float]:
    """Median planning and execution time (µs) the server reports for one statement."""
    out: dict[str, float] = {}
    for mode in ("force_custom_plan", "force_generic_plan"):
        await conn.execute(f"SET plan_cache_mode = {mode}")
        planning, execution = [], []
        for _ in range(n):
            cur = await conn.execute(
                "EXPLAIN (ANALYZE, TIMING OFF, FORMAT JSON) " + sql, params, prepare=False
            )
            row = await cur.fetchone()
            plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
            planning.append(plan[0]["Planning Time"] * 1000)
            execution.append(plan[0]["Execution Time"] * 1000)
        out[f"{mode} planning"] = statistics.median(planning)
        out[f"{mode} execution"] = statistics.median(execution)
    await conn.execute("RESET plan_cache_mode")
    return out


# -- 2. levers ----------------------------------------------------------------------------


async def connect(conninfo: str, options: str, *, autocommit: bool = True) -> Any:
    conn = await psycopg.AsyncConnection.connect(conninfo, autocommit=autocommit, options=options)
    await configure_connection(conn)
    return conn


def read_on(
    conn: Any, sql: str, params: Any, *, prepare: bool | None = None, binary: bool = False
) -> Call:
    async def call() -> list[Any]:
        async with conn.cursor(binary=binary) as cursor:
            await cursor.execute(sql, params, prepare=prepare)
            return await cursor.fetchall()

    return call


def kept_cursor(conn: Any, sql: str, params: Any, *, binary: bool = False) -> Call:
    cursor = conn.cursor(binary=binary)

    async def call() -> list[Any]:
        await cursor.execute(sql, params)
        return await cursor.fetchall()

    return call


def in_transaction(conn: Any, sql: str, params: Any) -> Call:
    async def call() -> list[Any]:
        cursor = await conn.execute(sql, params)
        rows = await cursor.fetchall()
        await conn.commit()
        return rows

    return call


def pooled(pool: Any, sql: str, params: Any, *, set_path: str | None = None) -> Call:
    async def call() -> list[Any]:
        async with pool.connection() as conn:
            if set_path:
                await conn.execute(set_path)
            cursor = await conn.execute(sql, params)
            return await cursor.fetchall()

    return call


async def first_runs(conninfo: str, options: str, statements: dict[str, Any], args: Any) -> None:
    """The first runs of a statement on a new connection: what preparing early buys."""
    ways: dict[str, tuple[str, bool | None]] = {
        "psycopg default (prepared at run 6)": ("", None),
        "prepare=True (from run 1)": ("", True),
        "prepare=True + plan_cache_mode=force_generic_plan": (
            " -c plan_cache_mode=force_generic_plan",
            True,
        ),
    }
    runs = 8
    for what, (sql, params) in statements.items():
        table: dict[str, list[list[float]]] = {}
        for _ in range(args.rounds):
            for name, (extra, prepare) in ways.items():
                conn = await connect(conninfo, options + extra)
                took = []
                for _ in range(runs):
                    started = time.perf_counter_ns()
                    await (await conn.execute(sql, params, prepare=prepare)).fetchall()
                    took.append((time.perf_counter_ns() - started) / 1000)
                await conn.close()
                table.setdefault(name, []).append(took)
        print(f"  {what}: first {runs} runs on a new connection (µs, medians over rounds)")
        for name, rounds in table.items():
            per_run = [statistics.median(r[i] for r in rounds) for i in range(runs)]
            total = statistics.median(sum(r) for r in rounds)
            shown = " ".join(f"{v:6.0f}" for v in per_run)
            print(f"    {name:<52} {shown}   sum {total:7.0f}")


async def levers(store: Any, conninfo: str, options: str, schema: str, args: Any) -> None:
    cursor_id = args.cursor
    memory_id = args.memory_id
    page = (
        PAGE_SQL[("forward", "session")],
        {"session_id": SESSION_ID, "leaf_id": None, "cursor": cursor_id, "want": 21},
    )
    recall = (
        MEMORY_SUBSET_SQL[("one", "session", store._has_supersessions)],
        {"session_id": SESSION_ID, "leaf_id": None, "id": memory_id, "ids": [memory_id]},
    )
    await first_runs(conninfo, options, {"page": page, "recall": recall}, args)
    conns = {
        key: await connect(conninfo, options)
        for key in ("rtt", "base", "unprepared", "binary", "kept", "kept_binary")
    }
    conns["txn"] = await connect(conninfo, options, autocommit=False)
    pool = store._pool
    set_path = f'SET search_path TO "{schema}"'
    table: dict[str, list[float]] = {}

    async def select_one() -> object:
        return await (await conns["rtt"].execute("SELECT 1")).fetchall()

    for what, (sql, params) in {"page": page, "recall": recall}.items():
        variants: dict[str, Call] = {
            "prepared (psycopg after 5 runs), text, new cursor, kept conn": read_on(
                conns["base"], sql, params
            ),
            "not prepared": read_on(conns["unprepared"], sql, params, prepare=False),
            "binary results": read_on(conns["binary"], sql, params, binary=True),
            "kept cursor": kept_cursor(conns["kept"], sql, params),
            "kept binary cursor": kept_cursor(conns["kept_binary"], sql, params, binary=True),
            "pool checkout per read": pooled(pool, sql, params),
            "pool checkout + SET per read": pooled(pool, sql, params, set_path=set_path),
            "transaction per read (BEGIN/COMMIT)": in_transaction(conns["txn"], sql, params),
        }
        for call in variants.values():
            for _ in range(10):  # warm: psycopg prepares after 5 runs
                await call()
        order = list(variants.items())
        for turn in range(args.rounds):
            rtt = await median_us(select_one, args.calls)
            table.setdefault("rtt", []).append(rtt)
            # A different order each round, so no variant always follows the same one.
            for name, call in order[turn % len(order) :] + order[: turn % len(order)]:
                took = await median_us(call, args.calls)
                table.setdefault(f"{what}: {name}", []).append(took)
                table.setdefault(f"{what}: {name} /rtt", []).append(took / rtt)
    print(f"  levers ({args.rounds} rounds x {args.calls} calls, medians of round medians)")
    for key, values in table.items():
        if key.endswith("/rtt"):
            continue
        ratio = table.get(f"{key} /rtt")
        shown = f"  {statistics.median(ratio):5.2f}x rtt" if ratio else ""
        spread = f"[{min(values):7.1f} .. {max(values):7.1f}]"
        print(f"    {key:<72} {statistics.median(values):8.1f} µs {spread}{shown}")
    for conn in conns.values():
        await conn.close()


async def store_ab(store: Any, args: Any) -> None:
    """The public page and recall with this tree's read path against the one before it
    (a new text cursor per read), on the same store, alternating block by block."""
    kept = pg_connection._rows
    timed = pg_connection._fetch

    async def new_text_cursor(raw: Any, text: str, params: Any, cursor: Any = None) -> list[Any]:
        async with raw.cursor() as fresh:
            await fresh.execute(text, params)
            return await fresh.fetchall() if fresh.description else []

    calls: dict[str, Call] = {
        "page of 20": lambda: recall_observational_memory_branch_page(
            store, args.cursor, session_id=SESSION_ID, limit=20
        ),
        "recall by id": lambda: recall_observational_memory(
            store, args.memory_id, session_id=SESSION_ID
        ),
    }
    # The reader's plain path, not the timestamped one of the parts above.
    pg_connection._fetch = ORIGINAL_FETCH  # type: ignore[assignment]
    try:
        for name, call in calls.items():
            ratios, took = [], {"kept binary cursor": [], "new text cursor": []}
            for turn in range(args.rounds * 4):
                pair = {}
                ways = [("kept binary cursor", kept), ("new text cursor", new_text_cursor)]
                for way, rows in ways if turn % 2 else ways[::-1]:
                    pg_connection._rows = rows  # type: ignore[assignment]
                    for _ in range(5):
                        await call()
                    pair[way] = await median_us(call, 50)
                    took[way].append(pair[way])
                ratios.append(pair["kept binary cursor"] / pair["new text cursor"])
            cuts = statistics.quantiles(ratios, n=4)
            print(
                f"  store A/B {name}: kept binary / new text cursor, {len(ratios)} blocks: "
                f"median {statistics.median(ratios):.3f} (quartiles {cuts[0]:.3f} .. "
                f"{cuts[2]:.3f}); "
                + ", ".join(f"{k} {statistics.median(v):.1f} µs" for k, v in took.items())
            )
    finally:
        pg_connection._rows = kept  # type: ignore[assignment]
        pg_connection._fetch = timed  # type: ignore[assignment]


async def main(base: str, args: Any) -> None:
    instrument()
    for size in args.sizes:
        await one_size(base, size, args)


async def one_size(base: str, size: int, args: Any) -> None:
    url = with_fresh_schema(base, f"driver_parts_{size}_{os.getpid()}")
    dataset = build_dataset(size)
    store: Any = await open_store(url)
    started = time.perf_counter()
    for i in range(0, size, 1000):
        await store.append_many(dataset.entries[i : i + 1000])
    print(f"size {size:,} (built in {time.perf_counter() - started:.0f} s)")
    args.cursor = dataset.middle_message_id()
    args.memory_id, _ = dataset.middle_memory_id()
    pool = store._pool
    conninfo = pool.conninfo
    options = pool.kwargs["options"]
    schema = url.rsplit("schema=", 1)[1]

    async def checkout() -> None:
        async with pool.connection():
            pass

    async def page() -> Any:
        return await recall_observational_memory_branch_page(
            store, args.cursor, session_id=SESSION_ID, limit=20
        )

    async def recall() -> Any:
        return await recall_observational_memory(store, args.memory_id, session_id=SESSION_ID)

    rtt_conn = await connect(conninfo, options)

    async def select_one() -> object:
        return await (await rtt_conn.execute("SELECT 1")).fetchall()

    for _ in range(20):
        await page()
        await recall()
    rtt = await median_us(select_one, args.calls)
    took = await median_us(checkout, 200)
    print(f"  SELECT 1 round trip {rtt:.1f} µs; pool checkout {took:.1f} µs")
    page_sql = PAGE_SQL[("forward", "session")]
    page_params = {
        "session_id": SESSION_ID,
        "leaf_id": None,
        "cursor": args.cursor,
        "want": 21,
    }
    recall_sql = MEMORY_SUBSET_SQL[("one", "session", store._has_supersessions)]
    recall_params = {
        "session_id": SESSION_ID,
        "leaf_id": None,
        "id": args.memory_id,
        "ids": [args.memory_id],
    }
    for name, public, store_call, sql, params in (
        ()
        if args.ab_only
        else (
            ("page of 20", page, "page_messages", page_sql, page_params),
            ("recall by id", recall, "memory_subset", recall_sql, recall_params),
        )
    ):
        spans = await parts(store, name, public, store_call, args.calls)
        server = await server_times(rtt_conn, sql, params)
        rtt = await median_us(select_one, args.calls)
        print(f"  {name}: parts (median µs over {args.calls} calls; rtt {rtt:.1f} µs)")
        for key, value in spans.items():
            print(f"    {key:<40} {value:8.1f} µs  {value / rtt:5.2f}x rtt")
        for key, value in server.items():
            print(f"    server {key:<33} {value:8.1f} µs")
    await rtt_conn.close()
    if not args.ab_only:
        await levers(store, conninfo, options, schema, args)
    await store_ab(store, args)
    await store.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--ab-only", action="store_true", help="only the store A/B")
    cli = parser.parse_args()
    cli.sizes = [int(s) for s in cli.sizes.split(",")]
    if os.environ.get("PRISM_TEST_POSTGRES_URL"):
        asyncio.run(main(os.environ["PRISM_TEST_POSTGRES_URL"], cli))
    else:
        with throwaway_cluster() as base_url:
            asyncio.run(main(base_url, cli))
