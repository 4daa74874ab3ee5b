"""``invalidated_ids`` takes the same forms, and fails closed the same way, everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from prism_om import Session, create_deletion_propagator, list_invalidated_ids
from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError
from prism_om.host import Agent
from prism_om.observational_memory import (
    create_observational_memory_commands,
    create_observational_memory_compaction_strategy,
    create_recall_memory_tool,
)
from prism_om.providers import ScriptedProvider
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime

SSN = "123-45-6789"


async def _revoked() -> tuple[Session, str]:
    store = MemoryStore()
    session = Session(store, "s1")
    secret = await session.append_message("user", f"My SSN is {SSN}, please keep it.")
    await session.append_message("assistant", "noted")
    await create_deletion_propagator(store).propagate("default", [secret.id], reason="revoked")
    return session, secret.id


@pytest.mark.parametrize("form", [frozenset, set, list, tuple])
async def test_a_fixed_collection_works_on_every_turn(form: Callable[[Any], Any]) -> None:
    session, _ = await _revoked()
    ids = await list_invalidated_ids(session.store, "default")
    memory = create_observational_memory(
        observation={"provider": OfflineMemoryProvider(), "message_tokens": 5},
        invalidated_ids=form(ids),
    )
    attached = memory.attach(
        Agent(session, ScriptedProvider([[{"text": "ok"}]] * 3)), session_model="offline"
    )
    for prompt in ("first turn", "second turn"):
        await attached.agent.run(prompt)
    assert SSN not in repr(await attached.agent.request_preview("hi"))
    assert not [o for o in (await session.store.ledger("s1")).observations if SSN in repr(o)]


def _makers(session: Session) -> dict[str, Callable[[Any], object]]:
    worker = {"provider": OfflineMemoryProvider()}
    return {
        "create_observational_memory": lambda s: create_observational_memory(
            observation=worker, invalidated_ids=s
        ),
        "runtime": lambda s: create_observational_memory_runtime(
            session=session,
            append_entry=session.append,
            observation=worker,
            session_model="offline",
            invalidated_ids=s,
        ),
        "strategy": lambda s: create_observational_memory_compaction_strategy(invalidated_ids=s),
        "recall_tool": lambda s: create_recall_memory_tool(store=session.store, invalidated_ids=s),
        "commands": lambda s: create_observational_memory_commands(
            store=session.store, invalidated_ids=s
        ),
        "agent": lambda s: Agent(session, ScriptedProvider([]), invalidated_ids=s),
    }


@pytest.mark.parametrize("bad", ["e0001", b"e0001", 5, [1, 2], ["ok", None]])
@pytest.mark.parametrize(
    "where",
    ["create_observational_memory", "runtime", "strategy", "recall_tool", "commands", "agent"],
)
async def test_a_bad_fixed_set_is_refused_at_creation(where: str, bad: object) -> None:
    session, _ = await _revoked()
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        _makers(session)[where](bad)


@pytest.mark.parametrize("returned", ["e0001", [7]])
async def test_a_callable_returning_a_bad_set_fails_closed_on_every_path(
    returned: object,
) -> None:
    session, _ = await _revoked()

    async def source() -> object:
        return returned

    memory = create_observational_memory(
        observation={"provider": OfflineMemoryProvider(), "message_tokens": 5},
        invalidated_ids=source,
    )
    attached = memory.attach(
        Agent(session, ScriptedProvider([[{"text": "ok"}]] * 3)), session_model="offline"
    )
    before = [e.id for e in await session.entries()]
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        await attached.agent.request_preview("hi")
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        await attached.agent.run("hello")
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        await attached.flush(force=True)
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        await attached.recall_tool().handler({"id": "0123456789ab"}, session_id="s1")
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        await attached.commands().view.run("", session_id="s1")
    with pytest.raises(InvalidInputError, match="invalidated_ids"):
        await attached.agent.compact()
    assert [e.id for e in await session.entries()] == before, "the store is as it was"
