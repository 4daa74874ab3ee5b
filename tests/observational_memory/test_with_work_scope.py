"""``with_work_scope`` restores the scope stack exactly, even when the body unbalanced it."""

from __future__ import annotations

import pytest

from prism_om.errors import InvalidInputError
from prism_om.observational_memory.scope_controller import (
    WorkScopeController,
    create_work_scope_controller,
    with_work_scope,
)
from prism_om.session import Session
from prism_om.stores.base import SessionStore

SID = "s1"


async def outer_scope(store: SessionStore) -> WorkScopeController:
    """A session whose caller already stands in scope ``outer``."""
    session = Session(store, SID)
    await session.append_message("user", "hello")
    scopes = create_work_scope_controller(session=session, append_entry=session.append)
    await scopes.open("outer")
    await scopes.open("other")
    await scopes.enter("outer")
    return scopes


async def test_body_that_entered_a_scope_then_raised_is_left_exactly(
    store: SessionStore,
) -> None:
    scopes = await outer_scope(store)

    async def body() -> None:
        await scopes.enter("other")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await with_work_scope(scopes, {"id": "task"}, body)
    assert (await store.scope_map(SID)).stack == ("outer",)


async def test_unbalanced_body_is_reported_after_the_stack_is_restored(
    store: SessionStore,
) -> None:
    scopes = await outer_scope(store)
    with pytest.raises(InvalidInputError, match="unbalanced"):
        async with with_work_scope(scopes, {"id": "task"}):
            await scopes.enter("other")
    assert (await store.scope_map(SID)).stack == ("outer",)


async def test_body_that_left_below_its_scope_does_not_pop_the_callers_scopes(
    store: SessionStore,
) -> None:
    scopes = await outer_scope(store)

    async def body() -> None:
        await scopes.leave()  # leaves "task": what remains belongs to the caller
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await with_work_scope(scopes, {"id": "task"}, body)
    assert (await store.scope_map(SID)).stack == ("outer",)
