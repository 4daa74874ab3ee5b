"""What ``PrismSession`` reads and runs per call, counted (never timed), on every adapter,
and what it reads back from a store written by the two-entry item shape (the committed
fixture ``tests/data/openai_agents``, written by d174eeb)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.sql_work import statements

from prism_om.integrations.openai_agents import ITEM_TYPE, PrismSession
from prism_om.integrations.openai_agents.items import item_of_data
from prism_om.stores import open_store
from prism_om.stores.postgres import PostgresStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.counting import CountingStore
from prism_om.workers.runtime import ObservationalMemoryRuntime

from .test_openai_agents_memory import offline_memory

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "openai_agents"
EXPECTED = json.loads((FIXTURES / "sessions-v4-expected.json").read_text())


def reply(text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def turn(n: int) -> list[dict[str, Any]]:
    """One turn of every item kind: a message, a call and its output, reasoning, a reply."""
    return [
        {"role": "user", "content": f"Ticket {n} ships on day {n}."},
        {"id": f"rs_{n}", "type": "reasoning", "summary": []},
        {"type": "function_call", "call_id": f"c{n}", "name": "look", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"c{n}", "output": f"day {n}"},
        reply(f"Noted: ticket {n}, day {n}.", n),
    ]


async def test_get_items_without_memory_reads_only_the_items(
    store_opener: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rows a SQL adapter's reads hand back, counted at the driver (support.sql_work),
    # so the test sees what a read cost, not only that it ran.
    with statements(monkeypatch) as traced:
        inner = await store_opener.open()
    try:
        store = CountingStore(inner)
        session = PrismSession("plain", store)  # type: ignore[arg-type]
        items = [item for n in range(8) for item in turn(n)]
        await session.add_items(items)
        # One entry per item (schema version 7), after the session's root marker; the
        # message items' entries are messages, their text stored once.
        stored = await inner.entries("plain")
        assert len(stored) == len(items) + 1
        assert [e.kind for e in stored[1:6]] == [
            "message",
            "custom",
            "message",
            "message",
            "message",
        ]
        assert all(e.custom_type == ITEM_TYPE for e in stored[1:])
        texts = [json.dumps(e.data) for e in stored if e.kind == "message"]
        assert not any("Ticket" in t or "Noted" in t for t in texts)
        with store.counting() as calls, traced.counting() as run:
            got = await session.get_items()
        assert got == items
        # One public read, of the item rows alone: no whole branch, no message entry.
        assert calls.read_names() == ["marked_data"]
        if isinstance(inner, (SqliteStore, PostgresStore)):
            # The leaf's position (one row), then exactly one row per item returned.
            assert run.rows == 1 + len(items)
        # What it read is exactly what it returned.
        marked = await inner.marked_data("plain", ITEM_TYPE)
        assert [item_of_data(m.data, m.message) for m in marked] == items
    finally:
        await inner.close()


async def test_get_items_without_memory_returns_fresh_items(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("fresh", store)
        await session.add_items(turn(1))
        first = await session.get_items()
        first[0]["content"] = "changed by the caller"
        first[4]["content"][0]["text"] = "changed too"
        assert await session.get_items() == turn(1)
    finally:
        await store.close()


async def test_get_items_without_memory_follows_pop_and_clear(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("moves", store)
        await session.add_items([*turn(1), *turn(2)])
        assert await session.pop_item() == turn(2)[-1]
        assert await session.get_items() == [*turn(1), *turn(2)[:-1]]
        await session.clear_session()
        assert await session.get_items() == []
        await session.add_items(turn(3))
        # The items of the branch left behind stay in the store, not in the read.
        assert await session.get_items() == turn(3)
    finally:
        await store.close()


async def test_one_add_items_call_flushes_once(
    store_opener: StoreOpener, monkeypatch: pytest.MonkeyPatch
) -> None:
    flushes: list[int] = []
    flush = ObservationalMemoryRuntime.flush

    async def counted(self: ObservationalMemoryRuntime, **options: Any) -> Any:
        flushes.append(1)
        return await flush(self, **options)

    monkeypatch.setattr(ObservationalMemoryRuntime, "flush", counted)
    store = await store_opener.open()
    batches: list[int] = []
    append_at_leaf = store.append_at_leaf

    async def recorded(entries: Any, **options: Any) -> Any:
        batches.append(sum(1 for e in entries if e.custom_type == ITEM_TYPE))
        return await append_at_leaf(entries, **options)

    monkeypatch.setattr(store, "append_at_leaf", recorded)
    inner = store
    try:
        session = PrismSession("flush", store, memory=offline_memory())
        items = [item for n in range(20) for item in turn(n)]
        await session.add_items(items)
        # A hundred items: one append of the whole batch (the memory workers' own
        # appends carry no item), then one memory flush.
        assert [n for n in batches if n] == [len(items)]
        assert flushes == [1]
        assert (await inner.ledger("flush")).observations, "the observer did not run"
        flushes.clear()
        await session.add_items(turn(20))
        assert flushes == [1]
    finally:
        await inner.close()


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_a_store_written_by_the_two_entry_shape_reads_back(kind: str, tmp_path: Path) -> None:
    if kind == "sqlite":
        shutil.copy(FIXTURES / "sessions-v4.db", tmp_path / "s.db")
        url = f"sqlite:{tmp_path / 's.db'}"
    else:
        shutil.copytree(FIXTURES / "sessions-v4-jsonl", tmp_path / "s")
        url = f"jsonl:{tmp_path / 's'}"
    async with await open_store(url) as store:
        plain = PrismSession("plain", store)
        assert await plain.get_items() == EXPECTED["plain"]
        assert await plain.get_items(2) == EXPECTED["plain"][-2:]
        # The branch the pop left behind still holds its items, the popped one last.
        current = await store.leaf("plain")
        (behind,) = [leaf for leaf in await store.leaves("plain") if leaf != current]
        old = [item_of_data(m.data) for m in await store.marked_data("plain", ITEM_TYPE, behind)]
        assert old == [*EXPECTED["after_pop"], EXPECTED["popped"]]
        assert await PrismSession("mem", store).get_items() == EXPECTED["mem"]
        # Appending to an old store continues its sessions.
        await plain.add_items(turn(9))
        assert await plain.get_items() == [*EXPECTED["plain"], *turn(9)]
        assert await plain.pop_item() == turn(9)[-1]


async def test_add_items_without_memory_reads_nothing_once_the_session_exists(
    store_opener: StoreOpener,
) -> None:
    inner = await store_opener.open()
    try:
        store = CountingStore(inner)
        session = PrismSession("writes", store)  # type: ignore[arg-type]
        with store.counting() as first:
            await session.add_items(turn(1))
        # A new session: its leaf is read once, to know it needs the root marker.
        assert first.read_names() == ["leaf"] and first.writes == 1
        with store.counting() as later:
            await session.add_items(turn(2))
            await session.add_items(turn(3)[:1])
        assert later.reads == 0 and later.writes == 2
        # Clearing keeps the marker to return to: the next batch needs no new one.
        await session.clear_session()
        await session.add_items(turn(4))
        assert await session.get_items() == turn(4)
        roots = [m.data for m in await inner.marked_data("writes", "openai-agents.session")]
        assert len(roots) == 1
    finally:
        await inner.close()
