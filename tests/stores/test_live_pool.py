"""The live pool (``om_live``, schema version 4): kept at append, read at a segment's tail.

Same answers as the pure fold on every adapter (forks before and after drops, memory
recorded on a fork), the pool kept by appends equal to one rebuilt from scratch, and
on SQLite a turn's live ledger that reads no drop row and a bounded number of marker
rows however long the session (rows counted, never time).
"""

from __future__ import annotations

import asyncio
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import aiosqlite
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.sql_work import statements

from prism_om.core.ledger import fold_ledger
from prism_om.core.ledger_views import live_ledger
from prism_om.stores import SessionStore
from prism_om.stores.sql.live_pool import backfill_live_pool
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import SUPERSESSION_OPERATIONS, BranchBuilder, random_builder
from tests.stores.test_turn_cost import run_turns


async def assert_every_point_equals_the_fold(store: SessionStore, sid: str) -> None:
    """Every leaf, and points inside each branch (not a segment's tail), against the fold."""
    for leaf in await store.leaves(sid):
        branch = await store.entries(sid, leaf)
        for point in {len(branch) - 1, len(branch) // 2, len(branch) * 3 // 4}:
            ledger = fold_ledger(branch[: point + 1])
            at = branch[point].id
            assert await store.live_ledger(sid, at) == live_ledger(ledger), (leaf, point)
            assert await store.ledger(sid, at) == ledger
    assert await store.live_ledger(sid) == live_ledger(fold_ledger(await store.entries(sid)))


async def test_a_fork_made_before_a_drop_still_sees_the_observation(store: SessionStore) -> None:
    b = BranchBuilder(session_id="fork")
    b.message("user")
    b.message("assistant")
    first = b.observe(2, covers=True)
    observed = first.data["observations"][0]["id"] if first.data else ""
    b.message("user")
    fork_point = b.path[-1].id
    b.drop([observed], covers=True)
    b.message("assistant")
    main = b.path[-1].id
    await store.append_many(b.entries)
    assert observed in (await store.ledger("fork", main)).dropped_observation_ids
    # A fork from before the drop: messages only (no pool of its own yet), then memory.
    b.checkout(fork_point)
    start = len(b.entries)
    b.message("assistant")
    await store.append_many(b.entries[start:])
    forked = b.path[-1].id
    live = await store.live_ledger("fork", forked)
    assert observed in live.observations_by_id
    await assert_every_point_equals_the_fold(store, "fork")
    start = len(b.entries)
    b.observe(1, covers=True)
    b.reflect(1, covers=True)
    b.message("user")
    await store.append_many(b.entries[start:])
    assert observed in (await store.live_ledger("fork", b.path[-1].id)).observations_by_id
    assert observed not in (await store.live_ledger("fork", main)).observations_by_id
    await assert_every_point_equals_the_fold(store, "fork")


@pytest.mark.parametrize("seed", [5, 6])
async def test_random_forked_sessions_equal_the_fold_at_every_point(
    store: SessionStore, seed: int
) -> None:
    builder = random_builder(
        seed, steps=140, session_id=f"lp{seed}", operations=(*SUPERSESSION_OPERATIONS, "fork")
    )
    await load_builder(store, builder, batch=1 + seed % 4)
    assert len(await store.leaves(builder.session_id)) > 1
    await assert_every_point_equals_the_fold(store, builder.session_id)


def rows_of(path: Path, table: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(path) as conn:
        rows = conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2, 3").fetchall()
    conn.close()
    return rows


def pool_of(path: Path) -> list[tuple[Any, ...]]:
    return rows_of(path, "om_live")


async def rebuilt_pool(path: Path) -> list[tuple[Any, ...]]:
    """The pool rebuilt from scratch (the migration's backfill), rolled back after.
    (Internal: no public call rebuilds a pool, and the kept one must equal it.)"""
    async with aiosqlite.connect(path, isolation_level=None) as conn:
        await conn.execute("BEGIN IMMEDIATE")
        await backfill_live_pool(conn)
        rows = list(await conn.execute_fetchall("SELECT * FROM om_live ORDER BY 1, 2, 3"))
        await conn.execute("ROLLBACK")
    return [tuple(row) for row in rows]


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    seed=st.integers(0, 10_000),
    steps=st.integers(20, 120),
    batch=st.integers(1, 6),
    ops=st.sampled_from(
        [
            SUPERSESSION_OPERATIONS,
            (*SUPERSESSION_OPERATIONS, "fork", "fork", "drop", "tombstone"),
            ("user", "observe", "observe", "drop", "reflect", "supersede", "fork", "compact"),
        ]
    ),
)
def test_the_pool_kept_by_appends_equals_one_rebuilt(
    tmp_path: Path, seed: int, steps: int, batch: int, ops: tuple[str, ...]
) -> None:
    path = tmp_path / f"{uuid.uuid4().hex}.db"
    builder = random_builder(seed, steps=steps, session_id="prop", operations=ops)

    async def check() -> None:
        async with await SqliteStore.open(path) as store:
            await load_builder(store, builder, batch=batch)
            await assert_every_point_equals_the_fold(store, "prop")
        assert pool_of(path) == await rebuilt_pool(path)

    asyncio.run(check())


async def test_sqlite_live_ledger_work_does_not_grow_with_the_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A turn's live ledger reads no drop row and a bounded number of marker rows: the
    same statements and the same work (SQLite's virtual machine, counted at the driver,
    ``support.sql_work``) at 160 turns as at 40, though the markers have grown."""
    path = tmp_path / "s.db"
    with statements(monkeypatch) as traced:
        store = await SqliteStore.open(path)
    async with store:
        work: list[tuple[int, int]] = []
        markers: list[int] = []
        done = 0
        for turns in (40, 160):
            await run_turns(store, turns - done, start=done)
            done = turns
            with traced.counting() as run:
                live = await store.live_ledger("long")
            assert live == live_ledger(fold_ledger(await store.entries("long")))
            assert not [sql for sql in run.statements if "om_drops" in sql], "drop rows read"
            work.append((run.count, run.work))
            markers.append(len(rows_of(path, "om_markers")))
    assert markers[1] > markers[0] + 40  # the session's markers grew...
    # ...and the live ledger's reads did not: at most one tick (WORK_TICK instructions)
    # more, where reading every marker row costs about one tick per ten.
    assert work[1][0] == work[0][0] and work[1][1] <= work[0][1] + 1, work


async def test_deleting_a_session_drops_its_pools(tmp_path: Path) -> None:
    path = tmp_path / "d.db"
    async with await SqliteStore.open(path) as store:
        await load_builder(store, random_builder(3, 80, session_id="gone"))
        assert pool_of(path)
        await store.delete_session("gone")
        assert pool_of(path) == []
        # Segment ids are reused by the next session: it must not meet the old pool.
        await load_builder(store, random_builder(4, 80, session_id="next"))
        await assert_every_point_equals_the_fold(store, "next")
    assert pool_of(path) == await rebuilt_pool(path)
