"""The drop handler next to other writers: a later entry after its drop is not a mismatch."""

from __future__ import annotations

import pytest
from support.revocation_story import story

from prism_om.core.records import OBSERVATIONS_DROPPED
from prism_om.entries import SessionEntry, custom_entry, message_entry
from prism_om.errors import BranchMismatchError
from prism_om.observational_memory.revocation import (
    TombstoneSet,
    create_observational_memory_drop_handler,
)
from prism_om.observational_memory.scope_controller import create_work_scope_controller
from prism_om.session import Session
from prism_om.stores.base import SessionStore
from prism_om.testing.memory_conformance import load_builder


async def test_a_turn_landing_right_after_the_drop_is_kept(store: SessionStore) -> None:
    builder, ids = story()
    await load_builder(store, builder)
    session = Session(store, "s1")

    async def append_then_next_turn(entry: SessionEntry) -> None:
        await session.append(entry)
        # The agent's next turn lands before the handler looks at the leaf.
        await session.append(message_entry("s1", "user", "next turn", parent_id=None))

    handler = create_observational_memory_drop_handler(
        session=session, append_entry=append_then_next_turn
    )
    dropped = await handler(TombstoneSet("docs", frozenset({ids["m1"]}), "revoked"))
    assert dropped is not None and dropped.data == {
        "type": OBSERVATIONS_DROPPED,
        "observationIds": [ids["o1"]],
    }
    branch = await store.entries("s1")
    assert [e.id for e in branch[-2:]] == [dropped.id, branch[-1].id]
    last = branch[-1].message
    assert last is not None and last.content == "next turn"  # the later turn stays the leaf
    assert (await store.ledger("s1")).dropped_observation_ids == (ids["o1"],)


async def test_a_drop_that_landed_with_other_content_is_a_mismatch(store: SessionStore) -> None:
    builder, ids = story()
    await load_builder(store, builder)
    session = Session(store, "s1")

    async def tampering(entry: SessionEntry) -> None:
        # Same id, other content: not the record the handler built.
        await session.append(
            custom_entry("s1", {"type": "host.note"}, parent_id=None).model_copy(
                update={"id": entry.id}
            )
        )

    handler = create_observational_memory_drop_handler(session=session, append_entry=tampering)
    with pytest.raises(BranchMismatchError):
        await handler(TombstoneSet("docs", frozenset({ids["m1"]}), "revoked"))


async def test_scope_controller_returns_the_entry_as_stored(store: SessionStore) -> None:
    session = Session(store, "s1")
    await session.append_message("user", "hello")

    async def after_another_writer(entry: SessionEntry) -> None:
        # Another writer appends between the controller reading the leaf and appending.
        await session.append_message("assistant", "meanwhile")
        await session.append(entry)

    controller = create_work_scope_controller(session=session, append_entry=after_another_writer)
    opened = await controller.open("task:a")
    assert opened == await store.get(opened.id)
    assert opened.parent_id == (await store.entries("s1"))[-2].id
