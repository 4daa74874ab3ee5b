"""A participant recalling an owner's observation answers as the owner's own recall does."""

from __future__ import annotations

import json

import pytest

from prism_om import (
    Session,
    create_deletion_propagator,
    create_memory_id,
    create_observational_memory_drop_handler,
    create_work_scope_controller,
    list_invalidated_ids,
)
from prism_om.attach import create_observational_memory
from prism_om.host import Agent
from prism_om.observational_memory.shared_scopes import SharedScopeSpec
from prism_om.providers import ScriptedProvider
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OfflineMemoryProvider

SCOPE = "build-42"
SSN = "987-65-4321"


async def _contribute(session: Session, text: str) -> tuple[str, str]:
    message = await session.append_message("user", text)
    memory_id = create_memory_id()
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": memory_id,
                    "text": text,
                    "sourceEntryIds": [message.id],
                    "observedAt": message.timestamp,
                }
            ],
            "coversUpToId": message.id,
        }
    )
    controller = create_work_scope_controller(session=session, append_entry=session.append)
    await controller.bind(SCOPE, [f"om:{memory_id}"])
    return memory_id, message.id


@pytest.mark.parametrize("drop", [True, False], ids=["drop-handler", "tombstones-only"])
async def test_participant_recall_of_a_revoked_owner_observation_says_revoked(
    store_opener: StoreOpener, drop: bool
) -> None:
    store = await store_opener.open()
    try:
        owner, part = Session(store, "owner"), Session(store, "part")
        osc = create_work_scope_controller(session=owner, append_entry=owner.append)
        psc = create_work_scope_controller(
            session=part, append_entry=part.append, owners={SCOPE: owner.id}
        )
        await owner.append_message("user", "start")
        await osc.open(SCOPE, kind="build")
        await osc.grant(SCOPE, [part.id])
        await part.append_message("user", "join")
        await psc.open(SCOPE, kind="build")
        await psc.enter(SCOPE)
        owner_obs, owner_msg = await _contribute(owner, f"Owner SSN is {SSN} for payroll.")
        await _contribute(part, "Flaky test on CI.")

        async def source() -> frozenset[str]:
            return await list_invalidated_ids(store, "default")

        memory = create_observational_memory(
            invalidated_ids=source, observation={"provider": OfflineMemoryProvider()}
        )
        spec = SharedScopeSpec(owner_session_id=owner.id, entries=store)
        attached = memory.attach(
            Agent(part, ScriptedProvider([[{"text": "ok"}]])),
            session_model="offline",
            shared_scopes={SCOPE: spec},
        )
        before = await attached.recall_tool().handler({"id": owner_obs}, session_id="part")
        assert before["found"] is True
        handlers = (
            [create_observational_memory_drop_handler(session=owner, append_entry=owner.append)]
            if drop
            else []
        )
        await create_deletion_propagator(store, handlers).propagate(
            "default", [owner_msg], reason="revoked"
        )
        answer = await attached.recall_tool().handler({"id": owner_obs}, session_id="part")
        assert (answer["found"], answer.get("reason")) == (False, "revoked")
        assert SSN not in json.dumps(answer)
        own = create_observational_memory(
            invalidated_ids=source, observation={"provider": OfflineMemoryProvider()}
        ).attach(Agent(owner, ScriptedProvider([[{"text": "ok"}]])), session_model="offline")
        mine = await own.recall_tool().handler({"id": owner_obs}, session_id="owner")
        assert (mine["found"], mine.get("reason")) == (False, "revoked")
        view = {c.name: str(await c.run("", session_id="part")) for c in attached.commands()}
        assert SSN not in view["om:view"]
        assert SSN not in repr(await attached.agent.request_preview("hi"))
    finally:
        await store.close()
