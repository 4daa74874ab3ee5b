"""``PrismSession`` with observational memory: the memory view, pop/clear off the branch
holding later memory, revocation, and memory work that never fails the SDK's call."""

from __future__ import annotations

from typing import Any

from prism_om.attach import ObservationalMemoryContextProvider, create_observational_memory
from prism_om.integrations.openai_agents import PrismSession
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

OFFLINE = OfflineMemoryProvider()


def offline_memory(message_tokens: int = 1, recent: int = 2, **options: Any) -> Any:
    workers = {"provider": OFFLINE, "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": message_tokens},
        reflection={**workers, "observation_tokens": 10**6},
        context={"recent_messages": recent},
        **options,
    )


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def reply(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


TURN_1 = [user("Atlas 2.4 ships on Tuesday 2026-03-17."), reply("Noted: Atlas ships 2026-03-17.")]
TURN_2 = [user("Leo owns migration 0042 on staging."), reply("Noted: Leo owns migration 0042.")]


def store_of(session: PrismSession) -> SessionStore:
    assert session._store is not None
    return session._store


def observation_ids(ledger: Any) -> set[str]:
    return {r.id for r in ledger.observations}


async def test_get_items_is_the_memory_then_the_recent_window(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("mem", store, memory=offline_memory(recent=2))
        await session.add_items(TURN_1)
        await session.add_items(TURN_2)
        ledger = await store.ledger("mem")
        assert ledger.observations, "the offline observer recorded nothing"
        items = await session.get_items()
        head, window = items[0], items[1:]
        assert head["role"] == "system"
        assert "<observational-memory>" in head["content"]
        assert "Atlas 2.4 ships" in head["content"]
        assert window == TURN_2  # the last two messages, verbatim
        # The memory is the block the attached context provider renders for the session.
        provider = ObservationalMemoryContextProvider(session.memory.settings)
        (block, _recent) = await provider.blocks(Session(store, "mem"))
        assert head["content"].startswith(f"<observational-memory>\n{block.text}\n</")
        # A limit still reads the exact tail, as the SDK's own write checks expect.
        assert await session.get_items(3) == [TURN_1[1], *TURN_2]
    finally:
        await store.close()


async def test_nothing_the_observer_has_not_covered_is_left_out() -> None:
    # The observer waits for 10**6 tokens: no memory yet, so the whole history is shown.
    async with PrismSession("wait", "memory:", memory=offline_memory(10**6, recent=1)) as session:
        await session.add_items(TURN_1)
        await session.add_items(TURN_2)
        assert await session.get_items() == [*TURN_1, *TURN_2]


async def test_the_window_never_starts_with_an_output_whose_call_was_cut_off() -> None:
    call = {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"}
    other = {"type": "function_call", "call_id": "c2", "name": "time", "arguments": "{}"}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    outputs = [
        {"type": "function_call_output", "call_id": "c1", "output": "Sunny in Oslo, 21 C."},
        {"type": "function_call_output", "call_id": "c2", "output": "It is 14:05 in Oslo."},
    ]
    async with PrismSession("calls", "memory:", memory=offline_memory(recent=1)) as session:
        await session.add_items([*TURN_1, user("What is the weather in Oslo?")])
        await session.add_items([reasoning, call, other, *outputs])
        items = await session.get_items()
        assert items[0]["role"] == "system"
        # The last message is c2's output: the window reaches back to both calls (c1's
        # output sits between them) and to the reasoning item right before them.
        assert items[1:] == [reasoning, call, other, *outputs]


async def test_an_output_whose_call_is_nowhere_is_left_out_of_the_window() -> None:
    stray = {"type": "function_call_output", "call_id": "c404", "output": "Done: 3 rows."}
    async with PrismSession("stray", "memory:", memory=offline_memory(recent=2)) as session:
        await session.add_items([*TURN_1, stray, reply("Migration 0042 finished cleanly.")])
        items = await session.get_items()
        assert items[0]["role"] == "system"
        assert items[1:] == [reply("Migration 0042 finished cleanly.")]
        assert (await session.get_items(2))[0] == stray  # the exact tail still has it


async def test_pop_moves_off_the_branch_holding_later_memory(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("pop", store, memory=offline_memory(recent=1))
        await session.add_items(TURN_1)
        first = observation_ids(await store.ledger("pop"))
        await session.add_items(TURN_2)
        later = observation_ids(await store.ledger("pop")) - first
        assert first and later, "each turn should be observed"
        later_text = [r.observation.text for r in (await store.ledger("pop")).observations]

        assert await session.pop_item() == TURN_2[1]
        # The popped item's message entry left the branch with it: no observer reads it.
        (last,) = await store.recent_messages("pop", 1)
        assert last.message is not None and last.message.text() == TURN_2[0]["content"]
        ledger = await store.ledger("pop")
        assert observation_ids(ledger) == first  # the new leaf's ledger lacks later records
        assert ledger.observation_covers_up_to_id is not None
        items = await session.get_items()
        assert items[-1] == TURN_2[0]
        context = str(items)
        for memory_id in later:
            assert memory_id not in context
        assert all(text not in context for text in later_text if "Leo" in text)
        # The records are still in the store, on the branch left behind.
        everything = {e.data.get("type") for e in await store.list("pop") if e.data}
        assert "om.observations.recorded" in everything
    finally:
        await store.close()


async def test_clear_moves_off_every_memory_record(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("clr", store, memory=offline_memory(recent=1))
        await session.add_items(TURN_1)
        await session.add_items(TURN_2)
        recorded = observation_ids(await store.ledger("clr"))
        assert recorded
        await session.clear_session()
        assert observation_ids(await store.ledger("clr")) == set()
        assert await session.get_items() == []
        fresh = user("The code freeze is Wednesday 2026-03-11 at 18:00 UTC.")
        await session.add_items([fresh])
        items = await session.get_items()
        assert items[-1] == fresh
        context = str(items)
        assert "Atlas" not in context and "Leo" not in context
        assert not recorded & observation_ids(await store.ledger("clr"))
    finally:
        await store.close()


async def test_revoked_items_keep_their_place_but_not_their_text() -> None:
    revoked: set[str] = set()
    memory = offline_memory(10**6, invalidated_ids=lambda: revoked)
    async with PrismSession("rev", "memory:", memory=memory) as session:
        call = {"type": "function_call", "call_id": "c9", "name": "pin", "arguments": "{}"}
        output = {"type": "function_call_output", "call_id": "c9", "output": "PIN is 4411"}
        await session.add_items([user("My PIN is 4411."), call, output])
        messages = [e for e in await store_of(session).entries("rev") if e.kind == "message"]
        revoked.update({messages[0].id, messages[2].id})
        assert await session.get_items() == [
            {"role": "user", "content": f"[revoked] {messages[0].id}"},
            call,
            {**output, "output": f"[revoked] {messages[2].id}"},
        ]
        # The revoked texts, not the bare digits: a random entry id can contain "4411".
        assert "PIN is 4411" not in str(await session.get_items(2))
        assert "PIN is 4411" not in str(await session.pop_item())


async def test_the_search_tool_withholds_what_the_session_revokes() -> None:
    revoked: set[str] = set()
    memory = offline_memory(10**6, invalidated_ids=lambda: revoked)
    async with PrismSession("find", "memory:", memory=memory) as session:
        await session.add_items([user("The Atlas launch is on Tuesday."), reply("Noted.")])
        tool = await session.search_memory_tool()
        found = await tool.handler({"query": "atlas launch"}, session_id="find")
        ids = [r["id"] for r in found["results"]]
        assert len(ids) == 1
        recall = await session.recall_memory_tool()
        page = await recall.handler({"cursor": ids[0], "limit": 1}, session_id="find")
        assert page["messages"]
        revoked.add(ids[0])  # asked on every call
        assert (await tool.handler({"query": "atlas"}, session_id="find"))["results"] == []


async def test_a_failing_worker_never_fails_add_items() -> None:
    broken = ScriptedProvider([[{"error": "model exploded"}]] * 10)
    events: list[tuple[str, dict[str, Any]]] = []
    memory = create_observational_memory(
        observation={"provider": broken, "model": "x", "message_tokens": 1},
        debug=lambda event, data: events.append((event, data)),
    )
    async with PrismSession("broken", "memory:", memory=memory) as session:
        await session.add_items(TURN_1)
        assert await session.get_items() == TURN_1
        assert session.runtime is not None and session.runtime.last_error
        assert "exploded" in session.runtime.last_error
        assert (await store_of(session).ledger("broken")).observation_coverage is None
    assert any("exploded" in str(data) for _, data in events)


async def test_background_memory_work_is_drained() -> None:
    memory = offline_memory(background=True)
    async with PrismSession("bg", "memory:", memory=memory) as session:
        await session.add_items(TURN_1)
        await session.drain()
        assert (await store_of(session).ledger("bg")).observations
        assert session.last_flush is not None


async def test_passive_memory_records_but_changes_no_read() -> None:
    memory = offline_memory(recent=1, passive=True)
    async with PrismSession("passive", "memory:", memory=memory) as session:
        await session.add_items(TURN_1)
        await session.add_items(TURN_2)
        assert (await store_of(session).ledger("passive")).observations
        assert await session.get_items() == [*TURN_1, *TURN_2]


class CountingStore:
    """A store that records which of its reads ran (a whole-branch read is the cost that
    grows with the transcript)."""

    WHOLE_BRANCH = frozenset({"entries", "list"})

    def __init__(self, inner: SessionStore) -> None:
        self._inner = inner
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if callable(value) and not name.startswith("_"):

            def record(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return value(*args, **kwargs)

            return record
        return value


async def test_per_turn_reads_never_load_the_whole_branch(tmp_path: Any) -> None:
    from prism_om.stores import open_store

    async with await open_store(f"sqlite:{tmp_path / 'turns.db'}") as inner:
        store = CountingStore(inner)
        session = PrismSession("turns", store, memory=offline_memory(recent=2))  # type: ignore[arg-type]
        for turn in range(12):
            await session.add_items(
                [user(f"Fact {turn}: ticket {turn} ships on day {turn}."), reply("Noted.")]
            )
        store.calls.clear()
        items = await session.get_items()
        assert items[0]["role"] == "system" and len(items) == 3
        assert await session.get_items(3) == (await session.get_items(limit=100))[-3:]
        store.calls.clear()
        await session.get_items(3)
        await session.add_items([user("One more fact: the demo is on Friday.")])
        await session.get_items()
        assert await session.pop_item() == user("One more fact: the demo is on Friday.")
        assert not store.WHOLE_BRANCH & set(store.calls), store.calls
