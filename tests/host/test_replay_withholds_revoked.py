"""Compaction keeps no revoked message, and the replayed history withholds them."""

from __future__ import annotations

import json

import pytest

from prism_om import Session, create_deletion_propagator, list_invalidated_ids
from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError
from prism_om.host import Agent
from prism_om.host.context import history_since_compaction, load_history_since_compaction
from prism_om.observational_memory import create_observational_memory_compaction_strategy
from prism_om.providers import ScriptedProvider
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OfflineMemoryProvider

SSN = "123-45-6789"


async def _revoked_session(store: object) -> tuple[Session, str]:
    session = Session(store, "s1")  # type: ignore[arg-type]
    secret = await session.append_message("user", f"My SSN is {SSN} ok.")
    await session.append_message("assistant", "noted")
    for n in range(3):
        await session.append_message("user", f"msg {n}")
    await create_deletion_propagator(store).propagate(  # type: ignore[arg-type]
        "default", [secret.id], reason="revoked"
    )
    return session, secret.id


@pytest.mark.parametrize("form", ["frozenset", "list", "sync-callable"])
async def test_compaction_never_keeps_a_revoked_message(
    store_opener: StoreOpener, form: str
) -> None:
    store = await store_opener.open()
    try:
        session, revoked = await _revoked_session(store)
        ids = await list_invalidated_ids(store, "default")
        source = {"frozenset": ids, "list": list(ids), "sync-callable": lambda: set(ids)}[form]
        strategy = create_observational_memory_compaction_strategy(
            keep_recent_entries=8, invalidated_ids=source
        )
        agent = Agent(session, ScriptedProvider([[{"text": "ok"}]]), compaction_strategy=strategy)
        entry = await agent.compact()
        assert entry.data is not None
        keep = entry.data["keepEntryIds"]
        assert revoked not in keep
        assert len(keep) == 4, "the window is taken from the other messages"
        assert SSN not in json.dumps(entry.model_dump(mode="json"))
        # A host without an invalidation set replays only what the compaction kept.
        assert SSN not in repr(await agent.request_preview("hi"))
    finally:
        await store.close()


async def test_strategy_refuses_an_async_source_it_cannot_read() -> None:
    async def source() -> set[str]:
        return set()

    with pytest.raises(InvalidInputError, match="synchronous"):
        create_observational_memory_compaction_strategy(invalidated_ids=source)


async def test_replayed_history_shows_a_revoked_message_as_a_marker(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        session, revoked = await _revoked_session(store)
        ids = await list_invalidated_ids(store, "default")
        branch = await session.entries()
        for history in (
            history_since_compaction(branch, ids),
            await load_history_since_compaction(session, ids),
        ):
            assert [e.id for e in history] == [e.id for e in branch]
            withheld = next(e for e in history if e.id == revoked)
            assert withheld.message is not None
            assert withheld.message.text() == f"[revoked] {revoked}"
            assert SSN not in repr(history)
        # Without a set nothing changes (the host's default).
        assert SSN in repr(history_since_compaction(branch))
        agent = Agent(session, ScriptedProvider([[{"text": "ok"}]]), invalidated_ids=ids)
        preview = await agent.request_preview("hi")
        assert SSN not in repr(preview)
        assert f"[revoked] {revoked}" in repr(preview)
    finally:
        await store.close()


@pytest.mark.parametrize("compact", [False, True])
@pytest.mark.parametrize("passive", [False, True])
async def test_attached_agent_request_withholds_revoked_text(
    store_opener: StoreOpener, passive: bool, compact: bool
) -> None:
    store = await store_opener.open()
    try:
        session, revoked = await _revoked_session(store)

        async def source() -> frozenset[str]:
            return await list_invalidated_ids(store, "default")

        memory = create_observational_memory(
            observation={"provider": OfflineMemoryProvider(), "message_tokens": 100_000},
            passive=passive,
            invalidated_ids=source,
            context={"recent_messages": 8},
        )
        agent = Agent(session, ScriptedProvider([[{"text": "ok"}]] * 3))
        attached = memory.attach(agent, session_model="offline")
        if compact:
            entry = await attached.agent.compact()
            assert entry.data is not None
            assert revoked not in entry.data["keepEntryIds"]
        preview = await attached.agent.request_preview("hi")
        assert SSN not in repr(preview)
        await attached.agent.run("hello again")
        assert SSN not in repr(await attached.agent.request_preview("hi"))
    finally:
        await store.close()


async def test_a_sync_source_returning_an_awaitable_fails_closed_at_compaction(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        session, _ = await _revoked_session(store)

        async def later() -> set[str]:
            return set()

        strategy = create_observational_memory_compaction_strategy(invalidated_ids=lambda: later())
        branch = await session.entries()
        with pytest.raises(InvalidInputError, match="awaitable"):
            strategy.compact(branch, session_id="s1")
        with pytest.raises(InvalidInputError, match="one string"):
            history_since_compaction(branch, branch[0].id)
        assert [e.id for e in await session.entries()] == [e.id for e in branch]
    finally:
        await store.close()
