"""Issue 12 items 4, 5, 6: the attached tool and commands follow the attached settings.

* 4: ``retrieval.page_limit`` is the page size of the attached recall tool when a call
  gives no ``limit``.
* 5: ``om:view`` merges granted shared-scope memory (``om:status`` stays local).
* 6: commands built through ``attach()`` use the agent's recent-message window and
  invalidation set, so "visible" means what the agent's context shows.
"""

from __future__ import annotations

from typing import Any

import pytest

from prism_om import MEMORY_BLOCK_NAME
from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError
from prism_om.host import Agent
from prism_om.observational_memory import create_memory_view_command, create_recall_memory_tool
from prism_om.observational_memory.scope_controller import create_work_scope_controller
from prism_om.observational_memory.shared_scopes import ScopeAccessEvent, SharedScopeSpec
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.stores.base import SessionStore
from prism_om.workers import OfflineMemoryProvider

STAMP = "2026-11-30T09:00:00.000Z"
SCOPE = "build-42"


def attached_to(
    store: SessionStore, sid: str, settings: dict[str, Any] | None = None, **kwargs: Any
) -> Any:
    offline = OfflineMemoryProvider()
    memory = create_observational_memory(
        {"observation": {"provider": offline, "model": "offline"}, **(settings or {})},
        invalidated_ids=kwargs.pop("invalidated_ids", None),
    )
    return memory.attach(Agent(Session(store, sid), ScriptedProvider(then="stop")), **kwargs)


async def observe(session: Session, oid: str, text: str, sources: list[str]) -> None:
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {"id": oid, "text": text, "sourceEntryIds": sources, "observedAt": STAMP}
            ],
            # An observer run covers what it read, here through its newest source.
            "coversUpToId": sources[-1],
        }
    )


# -- item 4 -----------------------------------------------------------------------------


async def test_attached_tool_pages_by_retrieval_page_limit(store: SessionStore) -> None:
    session = Session(store, "s1")
    messages = [await session.append_message("user", f"message {i}") for i in range(12)]
    attached = attached_to(store, "s1", {"retrieval": {"page_limit": 3}})
    tool = attached.recall_tool()
    page = await tool.handler({"cursor": messages[0].id}, session_id="s1")
    assert page["limit"] == 3
    assert [m["id"] for m in page["messages"]] == [m.id for m in messages[1:4]]
    assert page["hasMore"] is True
    # An explicit limit still wins, and the hard cap still holds.
    explicit = await tool.handler({"cursor": messages[0].id, "limit": 5}, session_id="s1")
    assert len(explicit["messages"]) == 5
    # The default of the settings themselves is the specification's 20.
    default = attached_to(store, "s1").recall_tool()
    assert (await default.handler({"cursor": messages[0].id}, session_id="s1"))["limit"] == 20


# -- item 6 -----------------------------------------------------------------------------


async def test_attached_commands_see_what_the_context_sees(store: SessionStore) -> None:
    session = Session(store, "s1")
    early = await session.append_message("user", "The budget is 4200 EUR.")
    for i in range(4):
        await session.append_message("user", f"filler {i}")
    await observe(session, "a00000000001", "Budget is 4200 EUR.", [early.id])
    # With the default window of 8 the source is a recent message, so the observation is
    # not visible; the agent's window of 2 leaves it out, so the agent is shown it.
    attached = attached_to(store, "s1", {"context": {"recent_messages": 2}})
    blocks = await attached.context_provider.blocks(session)
    memory = next(b for b in blocks if b.name == MEMORY_BLOCK_NAME)
    assert "a00000000001" in memory.memory_ids
    commands = attached.commands()
    view = await commands.view.run("", session_id="s1")
    assert view.text == memory.text
    assert view.data["observationIds"] == ["a00000000001"]
    status = await commands.status.run("", session_id="s1")
    assert status.data["observations"]["visible"] == 1
    assert status.data["tokens"]["renderedMemory"] == memory.tokens
    assert status.data["runtime"] == {"inFlight": False, "lastError": None}


async def test_attached_commands_follow_the_recent_token_cap(store: SessionStore) -> None:
    session = Session(store, "s1")
    early = await session.append_message("user", "The budget is 4200 EUR.")
    await session.append_message("user", "long " * 400)
    await observe(session, "a00000000001", "Budget is 4200 EUR.", [early.id])
    settings = {"context": {"recent_messages": 8, "recent_message_max_tokens": 50}}
    attached = attached_to(store, "s1", settings)
    blocks = await attached.context_provider.blocks(session)
    memory = next(b for b in blocks if b.name == MEMORY_BLOCK_NAME)
    view = await attached.commands().view.run("", session_id="s1")
    assert view.text == memory.text and view.data["observationIds"] == ["a00000000001"]


async def test_attached_commands_withhold_the_attached_invalidation(store: SessionStore) -> None:
    session = Session(store, "s1")
    source = await session.append_message("user", "secret plan")
    await observe(session, "a00000000001", "The plan is secret.", [source.id])
    revoked: set[str] = set()
    attached = attached_to(store, "s1", invalidated_ids=lambda: revoked)
    commands = attached.commands()
    before = await commands.view.run("full", session_id="s1")
    assert "The plan is secret." in before.text
    # Asked on every run: a revocation after the commands were built still lands.
    revoked.add(source.id)
    after = await commands.view.run("full", session_id="s1")
    assert "The plan is secret." not in after.text
    assert "[revoked] a00000000001" in after.text
    status = await commands.status.run("", session_id="s1")
    assert status.data["observations"]["active"] == 0
    assert status.data["revoked"]["observationIds"] == ["a00000000001"]


def test_invalidation_sources_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        create_recall_memory_tool(get_entries=lambda sid: [], invalidated_ids="e1")
    with pytest.raises(InvalidInputError):
        create_memory_view_command(get_entries=lambda sid: [], invalidated_ids=[1])
    with pytest.raises(InvalidInputError):
        create_memory_view_command(get_entries=lambda sid: [], shared_scopes=["x"])  # type: ignore[arg-type]


# -- item 5 -----------------------------------------------------------------------------


async def shared_setup(store: SessionStore) -> tuple[Session, Session]:
    owner, reader = Session(store, "owner"), Session(store, "reader")
    for session, oid in ((owner, "c00000000001"), (reader, "d00000000001")):
        msg = await session.append_message("user", f"work of {session.id}")
        await observe(session, oid, f"{session.id} finding {oid}", [msg.id])
        ctl = create_work_scope_controller(session=session, append_entry=session.append)
        await ctl.open(SCOPE, kind="shared")
        await ctl.bind(SCOPE, ["om:" + oid])
        if session is owner:
            await ctl.grant(SCOPE, ["reader"])
    return owner, reader


async def test_view_merges_granted_shared_memory(store: SessionStore) -> None:
    _, reader = await shared_setup(store)
    events: list[ScopeAccessEvent] = []
    spec = {SCOPE: SharedScopeSpec("owner", store)}
    attached = attached_to(store, "reader", shared_scopes=spec, on_scope_access=events.append)
    view = attached.commands().view
    # Not entered yet: the agent is not shown it, so neither is the visible view...
    visible = await view.run("", session_id="reader")
    assert "owner finding" not in visible.text and visible.data["sharedObservationIds"] == []
    # ...but the full view lists every granted scope.
    full = await view.run("full", session_id="reader")
    assert "owner finding c00000000001" in full.text
    assert full.data["sharedObservationIds"] == ["c00000000001"]
    await create_work_scope_controller(session=reader, append_entry=reader.append).enter(SCOPE)
    entered = await view.run("", session_id="reader")
    blocks = await attached.context_provider.blocks(reader)
    shared_block = next(b for b in blocks if b.name == "shared-work-scopes")
    assert shared_block.text in entered.text
    assert entered.data["sharedObservationIds"] == ["c00000000001"]
    assert events and all(e.granted for e in events)
    # The bare factory does the same with the same specs; status counts stay local.
    bare = create_memory_view_command(store=store, shared_scopes=spec)
    assert (await bare.run("", session_id="reader")).text == entered.text
    status = await attached.commands().status.run("", session_id="reader")
    assert status.data["observations"]["recorded"] == 1


async def test_view_withholds_revoked_shared_memory(store: SessionStore) -> None:
    owner, _ = await shared_setup(store)
    owner_msg = (await owner.entries())[0].id
    spec = {SCOPE: SharedScopeSpec("owner", store)}
    attached = attached_to(store, "reader", shared_scopes=spec, invalidated_ids=lambda: {owner_msg})
    full = await attached.commands().view.run("full", session_id="reader")
    assert "owner finding" not in full.text and full.data["sharedObservationIds"] == []
