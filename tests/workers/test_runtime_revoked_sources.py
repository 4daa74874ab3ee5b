"""A revoked source stops feeding memory: no worker request, no new entry carries it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from prism_om import Session, create_deletion_propagator, list_invalidated_ids
from prism_om.attach import create_observational_memory
from prism_om.host import Agent
from prism_om.providers import ScriptedProvider
from prism_om.providers.base import ProviderEvent, ProviderRequest
from prism_om.stores import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime

SSN = "123-45-6789"


class RecordingProvider(OfflineMemoryProvider):
    """The offline worker model, keeping every request it is sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    async def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        self.requests.append(repr(request))
        async for event in super().generate(request):
            yield event


def _forms(store: SessionStore) -> dict[str, Callable[[frozenset[str]], Any]]:
    async def async_source() -> frozenset[str]:
        return await list_invalidated_ids(store, "default")

    return {
        "frozenset": lambda ids: ids,
        "list": lambda ids: list(ids),
        "sync-callable": lambda ids: lambda: set(ids),
        "async-callable": lambda ids: async_source,
    }


@pytest.mark.parametrize("form", ["frozenset", "list", "sync-callable", "async-callable"])
async def test_a_revoked_message_never_reaches_a_worker_nor_a_new_entry(
    store_opener: StoreOpener, form: str
) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "s1")
        secret = await session.append_message(
            "user", f"My SSN is {SSN} and I live at 42 Elm Street in Springfield today."
        )
        await create_deletion_propagator(store).propagate("default", [secret.id], reason="revoked")
        ids = await list_invalidated_ids(store, "default")
        spy = RecordingProvider()
        memory = create_observational_memory(
            observation={"provider": spy, "message_tokens": 5},
            reflection={"provider": spy, "observation_tokens": 1},
            context={"recent_messages": 2},
            invalidated_ids=_forms(store)[form](ids),
        )
        attached = memory.attach(
            Agent(session, ScriptedProvider([[{"text": "Noted."}]] * 5)), session_model="offline"
        )
        for prompt in ["We ship billing 2.4 to staging on Friday with Sam.", "ok then bye now"]:
            await attached.agent.run(prompt)
        await attached.drain()
        await attached.flush(force=True)
        assert spy.requests, "the workers ran"
        assert not [r for r in spy.requests if SSN in r]
        ledger = await store.ledger("s1")
        assert ledger.observations, "the other messages were observed"
        assert all(secret.id not in o.observation.source_entry_ids for o in ledger.observations)
        # Coverage moved past the revoked message: it is not pending forever.
        assert ledger.observation_covers_up_to_id is not None
        after = [e for e in await store.entries("s1") if e.id != secret.id]
        assert not [e.id for e in after if SSN in e.model_dump_json()]
        assert SSN not in repr(await attached.agent.request_preview("hi"))
    finally:
        await store.close()


async def test_reflector_and_dropper_never_get_a_revoked_observation(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "s1")
        secret = await session.append_message("user", f"Remember my SSN {SSN} for the tax form.")
        await session.append_message("user", "We ship billing 2.4 to staging on Friday with Sam.")
        observer = RecordingProvider()
        first = create_observational_memory_runtime(
            session=session,
            append_entry=session.append,
            observation={"provider": observer},
            session_model="offline",
        )
        await first.flush(force=True)
        ledger = await store.ledger("s1")
        leaked = [o.id for o in ledger.observations if SSN in o.observation.text]
        assert leaked, "the observation carrying the SSN was recorded before the revocation"
        await create_deletion_propagator(store).propagate("default", [secret.id], reason="revoked")
        await session.append_message("user", "Sam also owns the rollback plan for billing 2.4.")
        before = {e.id for e in await store.entries("s1")}
        workers = RecordingProvider()
        runtime = create_observational_memory_runtime(
            session=session,
            append_entry=session.append,
            observation={"provider": workers},
            reflection={"provider": workers, "observation_tokens": 1},
            dropper={"provider": workers, "policy": "model"},
            settings={"context": {"observations_pool_max_tokens": 1}},
            session_model="offline",
            invalidated_ids=lambda: list_invalidated_ids(store, "default"),
        )
        result = await runtime.flush(force=True)
        ran = {o.worker: o.status for o in result.outcomes}
        assert ran == {
            "observer": "ran",
            "reflector": "ran",
            "consolidator": "ran",
            "dropper": "ran",
        }, result
        assert workers.requests
        assert not [r for r in workers.requests if SSN in r]
        new = [e for e in await store.entries("s1") if e.id not in before]
        assert new, "the flush wrote entries"
        assert not [e.id for e in new if SSN in e.model_dump_json()]
    finally:
        await store.close()
