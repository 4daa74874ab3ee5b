"""PostgreSQL answers a page and a recall in one statement each, as the memory store does.

Each test counts the statements the store sends (every psycopg ``execute``) and checks
the answers against a ``MemoryStore`` holding the same entries, on sessions with forks
(several branch pieces), at the current leaf and at other leaves, and for the errors.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterator
from typing import Any

import psycopg
import pytest

from prism_om.entries import SessionEntry
from prism_om.errors import DuplicateEntryError, PrismMemoryError
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.testing.generate import make_message
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder


@pytest.fixture
def statements(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The text of every statement a psycopg cursor executes, in order."""
    sent: list[str] = []
    execute = psycopg.AsyncCursor.execute

    async def counted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(str(query))
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", counted)
    yield sent


Stores = tuple[SessionStore, MemoryStore, BranchBuilder]


@pytest.fixture
async def stores(postgres_url: str) -> AsyncIterator[Stores]:
    """A PostgreSQL store and a memory store with the same forked session."""
    builder = random_builder(3, 90)
    other = random_builder(4, 20, session_id="s2")
    pg = await open_store(postgres_url)
    memory = MemoryStore()
    for store in (pg, memory):
        await load_builder(store, builder)
        await load_builder(store, other)
    try:
        yield pg, memory, builder
    finally:
        await pg.close()


async def outcome(call: Any) -> Any:
    """What a call returns, or the type and message of what it raises."""
    try:
        return await call
    except PrismMemoryError as exc:
        return type(exc).__name__, str(exc).split(":")[0]


def ids(page: tuple[list[SessionEntry], bool]) -> tuple[list[str], bool]:
    return [entry.id for entry in page[0]], page[1]


async def test_a_page_is_one_statement_and_matches_the_memory_store(
    stores: Stores, statements: list[str]
) -> None:
    pg, memory, builder = stores
    leaves = await memory.leaves("s1")
    assert len(leaves) > 2, "the session forks, so branches have several pieces"
    messages = [e.id for e in builder.entries if e.kind == "message"]
    cursors = [*messages[::5], messages[-1]]
    checked = 0
    for cursor, leaf, way, limit in itertools.product(
        cursors, [None, *leaves[:3]], ("forward", "backward"), (1, 4)
    ):
        want = await outcome(memory.page_messages("s1", cursor, limit, way, leaf))
        del statements[:]
        got = await outcome(pg.page_messages("s1", cursor, limit, way, leaf))
        assert len(statements) == 1, statements
        if isinstance(want, tuple) and isinstance(want[0], list):
            want, got = ids(want), ids(got)
            checked += bool(want[0])
        assert got == want, (cursor, leaf, way, limit)
    assert checked >= 10, "many cursors lie on the branches asked"


async def test_page_errors_come_from_the_one_statement_in_order(
    stores: Stores, statements: list[str]
) -> None:
    pg, memory, builder = stores
    message = next(e.id for e in builder.path if e.kind == "message")
    custom = next(e.id for e in builder.path if e.kind != "message")
    other_leaf = (await memory.leaves("s2"))[0]
    cases = [
        ("s1", "ghost", None),  # cursor not in the store
        ("nobody", message, None),  # unknown session
        ("s1", custom, None),  # cursor is not a message
        ("s1", message, "ghost"),  # leaf not in the store
        ("s1", message, other_leaf),  # leaf of another session
        ("s2", message, None),  # cursor of another session's branch
    ]
    for session_id, cursor, leaf in cases:
        want = await outcome(memory.page_messages(session_id, cursor, 3, "forward", leaf))
        del statements[:]
        got = await outcome(pg.page_messages(session_id, cursor, 3, "forward", leaf))
        assert isinstance(want, tuple) and isinstance(want[0], str), want
        assert got[0] == want[0], (session_id, cursor, leaf, got, want)
        assert len(statements) == 1


async def test_recall_is_one_statement_sources_included(
    stores: Stores, statements: list[str]
) -> None:
    pg, memory, builder = stores
    observations = [
        o["id"]
        for e in builder.path
        if e.data is not None and e.data.get("type") == "om.observations.recorded"
        for o in e.data["observations"]
    ]
    assert observations
    for memory_id in observations:
        want = await recall_observational_memory(memory, memory_id, session_id="s1")
        del statements[:]
        got = await recall_observational_memory(pg, memory_id, session_id="s1")
        assert got == want
        assert got.found and got.sources
        assert len(statements) == 1, statements


async def test_memory_subset_at_any_leaf_and_for_many_ids_matches_the_memory_store(
    stores: Stores, statements: list[str]
) -> None:
    pg, memory, builder = stores
    every = sorted(
        {
            item["id"]
            for e in builder.entries
            if e.data is not None
            for key in ("observations", "reflections")
            for item in e.data.get(key, ())
        }
    )
    assert len(every) > 3
    leaves = await memory.leaves("s1")
    for leaf, wanted in itertools.product([None, *leaves], (every[:1], every, [])):
        want = await outcome(memory.memory_subset("s1", wanted, leaf))
        del statements[:]
        got = await outcome(pg.memory_subset("s1", wanted, leaf))
        assert got == want, (leaf, wanted)
        assert len(statements) == (1 if wanted else 0)
    other_leaf = (await memory.leaves("s2"))[0]
    for leaf in ("ghost", other_leaf):
        want = await outcome(memory.memory_subset("s1", every, leaf))
        got = await outcome(pg.memory_subset("s1", every, leaf))
        assert got[0] == want[0], leaf


async def test_memory_with_sources_is_one_statement_and_keeps_nothing(
    stores: Stores, statements: list[str]
) -> None:
    pg, memory, builder = stores
    recorded = next(e for e in builder.path if e.data is not None and e.data.get("observations"))
    observation = recorded.data["observations"][0]  # type: ignore[index]
    del statements[:]
    got = await pg.memory_with_sources("s1", observation["id"])
    assert len(statements) == 1
    assert got == await memory.memory_with_sources("s1", observation["id"])
    sources = observation["sourceEntryIds"]
    assert set(got[1]) == set(sources)
    # Nothing is kept for a later call: a get_many reads the server, whatever came before.
    await pg.memory_subset("s1", [observation["id"]])
    del statements[:]
    assert await pg.get_many(sources) == await memory.get_many(sources)
    assert len(statements) == 1
    assert await pg.get("ghost") is None


async def test_an_append_takes_no_savepoint_and_still_names_a_duplicate(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    transactions = 0
    transaction = psycopg.AsyncConnection.transaction

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        nonlocal transactions
        transactions += 1
        return transaction(self, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncConnection, "transaction", counted)
    async with await open_store(postgres_url) as store:
        await store.append(make_message("s1", "a", None, "user", "one", 1))
        transactions = 0
        batch = [
            make_message("s2", f"b{n}", f"b{n - 1}" if n else None, "user", "x", n)
            for n in range(3)
        ]
        await store.append_many(batch)
        assert transactions == 1, "one transaction, no savepoint"
        # "a" is stored in s1: only the unique index sees it, and the error names it.
        clash = [
            make_message("s3", "c", None, "user", "x", 1),
            make_message("s3", "a", "c", "user", "x", 2),
        ]
        with pytest.raises(DuplicateEntryError, match="'a'"):
            await store.append_many(clash)
        assert await store.leaf("s3") is None
        assert await store.get("c") is None
        await store.append_many(clash[:1])
        assert await store.leaf("s3") == "c"


async def test_an_append_sends_its_writes_in_one_pipeline(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The session row, the summary and the entries go to the server together."""
    from psycopg import pq

    modes: dict[str, bool] = {}
    execute = psycopg.AsyncCursor.execute

    async def noted(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        words = " ".join(str(query).split()[:3])
        modes[words] = self.connection.pgconn.pipeline_status != pq.PipelineStatus.OFF
        return await execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.AsyncCursor, "execute", noted)
    async with await open_store(postgres_url) as store:
        await store.append(make_message("s1", "a", None, "user", "one", 1))
        await store.append(make_message("s1", "b", "a", "user", "two", 2))
        assert await store.entries("s1") != []
    appended = {"INSERT INTO sessions", "UPDATE sessions SET", "INSERT INTO session_summary"}
    assert {words: modes.get(words) for words in appended} == dict.fromkeys(appended, True)
    # The reads before them need their answers at once: no pipeline there.
    assert not modes["SELECT root_id FROM"]
