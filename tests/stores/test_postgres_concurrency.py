"""Many writers, many hosts, on PostgreSQL: 4 processes (4 pools) append to one session
and to four sessions, through ``append_at_leaf`` and through explicit parents; then every
session is checked entry by entry: nothing lost, no accidental fork, one branch each.
Two stores in one process (two pools: two "hosts") race the same way. Timings and the
parallelism figure are ``python -m bench.postgres_concurrency``'s, not asserted here.
"""

from __future__ import annotations

import asyncio
import os

from support.pg_concurrency import Writer, check_session, run_writers

from prism_om.stores import open_store
from prism_om.testing.generate import make_message

# Appends per writer process (the figure); PRISM_PG_APPENDS overrides it.
APPENDS = int(os.environ.get("PRISM_PG_APPENDS", "500"))
TAGS = ("w0", "w1", "w2", "w3")


async def _checked(url: str, sessions: dict[str, dict[str, int]], root: str | None) -> None:
    store = await open_store(url)
    try:
        assert sorted(await store.sessions()) == sorted(sessions)
        for session_id, chains in sessions.items():
            found = await check_session(store, session_id, chains, root)
            assert found.problems == []
            assert found.entries == sum(chains.values()) + (1 if root else 0)
    finally:
        await store.close()


def test_four_processes_at_the_leaf_of_one_session(postgres_url: str) -> None:
    # No session exists yet: the writers race to create it, too.
    run_writers(postgres_url, [Writer("leaf", "one", tag, APPENDS) for tag in TAGS])
    asyncio.run(_checked(postgres_url, {"one": dict.fromkeys(TAGS, APPENDS)}, None))


def test_four_processes_at_the_leaves_of_four_sessions(postgres_url: str) -> None:
    run_writers(postgres_url, [Writer("leaf", f"s-{tag}", tag, APPENDS) for tag in TAGS])
    asyncio.run(_checked(postgres_url, {f"s-{t}": {t: APPENDS} for t in TAGS}, None))


def test_four_processes_with_explicit_parents_into_four_sessions(postgres_url: str) -> None:
    run_writers(postgres_url, [Writer("parents", f"s-{tag}", tag, APPENDS) for tag in TAGS])
    asyncio.run(_checked(postgres_url, {f"s-{t}": {t: APPENDS} for t in TAGS}, None))


def test_four_processes_with_explicit_parents_in_one_session(postgres_url: str) -> None:
    # Each writer chains under the shared root: four branches asked for, four made, and
    # no entry of one writer's chain lands on another's.
    async def root() -> None:
        async with await open_store(postgres_url) as store:
            await store.append_many([make_message("one", "root", None, "user", "r", 0)])

    asyncio.run(root())
    run_writers(
        postgres_url, [Writer("parents", "one", tag, APPENDS, parent="root") for tag in TAGS]
    )
    asyncio.run(_checked(postgres_url, {"one": dict.fromkeys(TAGS, APPENDS)}, "root"))


async def test_two_stores_race_at_one_leaf_and_on_explicit_parents(postgres_url: str) -> None:
    # Two pools in one process: each store appends at the leaf of "shared" and extends
    # its own explicit chain in "own-<n>", all interleaved on the event loop.
    count = 200
    first = await open_store(postgres_url)
    second = await open_store(postgres_url)
    try:

        async def write(store: object, tag: str) -> None:
            previous = None
            for n in range(count):
                entry = make_message("shared", f"{tag}-{n}", None, "user", "x", n)
                await store.append_at_leaf([entry])  # type: ignore[attr-defined]
                own = make_message(f"own-{tag}", f"o{tag}-{n}", previous, "user", "y", n)
                await store.append_many([own])  # type: ignore[attr-defined]
                previous = own.id

        await asyncio.gather(write(first, "h1"), write(second, "h2"))
        for store in (first, second):
            found = await check_session(store, "shared", {"h1": count, "h2": count})
            assert found.problems == [] and found.leaves == 1
            assert found.entries == 2 * count
            for tag in ("h1", "h2"):
                mine = await check_session(store, f"own-{tag}", {f"o{tag}": count})
                assert mine.problems == [] and mine.leaves == 1
    finally:
        await first.close()
        await second.close()
