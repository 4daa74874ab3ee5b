"""Recall by id on SQLite is a point read: no thread hop, unless it must take one.

Counted, not timed: the hops queued on aiosqlite connections, the statements run on the
loop's own connection. The answers are the ones the hop gives (and the list path).
"""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from prism_om.core.records import REFLECTIONS_RECORDED
from prism_om.errors import StoreClosedError
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.sqlite import SqliteStore
from prism_om.stores.sqlite.loop_reads import POINT_MAX_PARAMS
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder

from ..observational_memory.test_recall import Story
from .test_sqlite_one_hop import hops


@pytest.fixture
async def story_store(tmp_path: Path) -> Any:
    story = Story()
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await load_builder(store, story.builder)
        yield store, story


async def recall(store: SqliteStore, memory_id: str, **kwargs: Any) -> Any:
    return await recall_observational_memory(store, memory_id, session_id="s1", **kwargs)


def listed(story: Story, memory_id: str, **kwargs: Any) -> Any:
    return recall_observational_memory(story.path, memory_id, **kwargs)


async def test_recall_takes_no_hop(story_store: Any) -> None:
    store, story = story_store
    for memory_id in (story.o1, story.o3, story.r1, story.foreign, "0" * 12):
        got: list[Any] = []

        async def call(memory_id: str = memory_id, got: list[Any] = got) -> None:
            got.append(await recall(store, memory_id))

        assert await hops(call) == 0
        assert got[0] == listed(story, memory_id)
    # A given leaf is looked up on the same connection.
    out = await recall(store, story.o1, leaf_id=story.m5.id)
    assert out == listed(story, story.o1)


async def test_withholding_reads_with_one_hop(story_store: Any) -> None:
    # Withholding a reflection may read the whole ledger: never on the loop.
    store, story = story_store
    invalid = {story.o1}
    got: list[Any] = []

    async def call() -> None:
        got.append(await recall(store, story.r1, invalidated_ids=invalid))

    assert await hops(call) == 1
    assert got[0] == listed(story, story.r1, invalidated_ids=invalid)
    assert got[0].to_json()["reason"] == "revoked"


async def test_many_sources_take_the_hop(tmp_path: Path) -> None:
    b = BranchBuilder(session_id="s1", rng=random.Random(3))
    cited = [b.message("user", f"m{i}").id for i in range(POINT_MAX_PARAMS + 6)]
    rec = b.observe(1, sources=cited)
    memory_id = rec.data["observations"][0]["id"] if rec.data else ""
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await load_builder(store, b)
        got: list[Any] = []

        async def call() -> None:
            got.append(await recall_observational_memory(store, memory_id, session_id="s1"))

        # The id's rows on the loop, then the wide read of its sources with one hop.
        assert await hops(call) == 1
        assert got[0] == recall_observational_memory(b.path, memory_id)
        assert len(got[0].sources) == len(cited)


async def test_a_wide_reflection_is_redone_with_one_hop(tmp_path: Path) -> None:
    # Its supports are looked up in one statement bound to more than POINT_MAX_PARAMS
    # values: that statement never runs on the loop, the read is redone with a hop.
    b = BranchBuilder(session_id="s1", rng=random.Random(5))
    supports = []
    for i in range(POINT_MAX_PARAMS // 4 + 2):
        message = b.message("user", f"m{i}")
        rec = b.observe(1, sources=[message.id])
        supports.append(rec.data["observations"][0]["id"] if rec.data else "")
    reflection_id = b.memory_id()
    b.custom(
        {
            "type": REFLECTIONS_RECORDED,
            "reflections": [{"id": reflection_id, "text": "all", "observationIds": supports}],
        }
    )
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await load_builder(store, b)
        got: list[Any] = []

        async def call() -> None:
            got.append(await recall_observational_memory(store, reflection_id, session_id="s1"))

        assert await hops(call) == 1  # the supports' rows; the sources on the loop
        assert got[0] == recall_observational_memory(b.path, reflection_id)
        assert len(got[0].supporting_observations) == len(supports)


class BusyConnection:
    """Stands in for the loop's connection: every statement meets a locked file."""

    def __init__(self) -> None:
        self.statements = 0

    def execute(self, sql: str, params: Any = ()) -> Any:
        self.statements += 1
        raise sqlite3.OperationalError("database is locked")


async def test_a_busy_file_takes_the_hop_instead_of_waiting(story_store: Any) -> None:
    store, story = story_store
    await recall(store, story.o1)  # opens the loop's connection
    busy = BusyConnection()
    real, store._point.raw = store._point.raw, busy
    try:
        got: list[Any] = []

        async def call() -> None:
            got.append(await recall(store, story.o1))

        # Its one point read (the id's rows with their sources) met the busy file once
        # and the recall was redone with one hop: no wait on the loop.
        assert await hops(call) == 1
        assert busy.statements == 1
        assert got[0] == listed(story, story.o1)
    finally:
        store._point.raw = real


async def test_a_failing_connection_leaves_the_read_to_the_hop(story_store: Any) -> None:
    # Any other error on the loop's connection: the hop's reader redoes the read (and
    # reports the error if it meets it too); later reads go straight to the hop.
    store, story = story_store
    await recall(store, story.o1)

    class Broken(BusyConnection):
        def execute(self, sql: str, params: Any = ()) -> Any:
            self.statements += 1
            raise sqlite3.DatabaseError("database disk image is malformed")

        def close(self) -> None:
            self.closed = True

    broken = Broken()
    store._point.raw = broken
    got: list[Any] = []

    async def call() -> None:
        got.append(await recall(store, story.o1))

    assert await hops(call) == 1  # the id's rows and sources redone: the one-hop unit
    assert broken.statements == 1 and broken.closed
    assert got[0] == listed(story, story.o1)
    assert await hops(call) == 1  # no second try on the loop: the one-hop unit
    assert got[1] == got[0]
    assert broken.statements == 1


async def test_closed_store_refuses_and_closes_its_loop_connection(tmp_path: Path) -> None:
    story = Story()
    store = await SqliteStore.open(tmp_path / "s.db")
    await load_builder(store, story.builder)
    await recall(store, story.o1)
    raw = store._point.raw
    assert raw is not None
    await store.close()
    assert store._point.raw is None
    with pytest.raises(sqlite3.ProgrammingError):
        raw.execute("SELECT 1")
    with pytest.raises(StoreClosedError):
        await recall(store, story.o1)


async def test_read_only_store_reads_with_its_one_connection(tmp_path: Path) -> None:
    story = Story()
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await load_builder(store, story.builder)
    async with await SqliteStore.open(tmp_path / "s.db", read_only=True) as store:
        got: list[Any] = []

        async def call() -> None:
            got.append(await recall(store, story.o1))

        assert await hops(call) == 1
        assert store._point.raw is None
        assert got[0] == listed(story, story.o1)
