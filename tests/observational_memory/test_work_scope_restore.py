"""``with_work_scope`` puts the scope stack back exactly, whatever the body did to it."""

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

SID = "w"


async def based(store: SessionStore, stack: tuple[str, ...]) -> WorkScopeController:
    """A controller whose stack is ``stack``, with scopes ``x`` and ``y`` open too."""
    session = Session(store, SID)
    await session.append_message("user", "hi")
    scopes = create_work_scope_controller(session=session, append_entry=session.append)
    for scope_id in ("base", "inner", "x", "y"):
        await scopes.open(scope_id, kind="task")
    for scope_id in stack:
        await scopes.enter(scope_id)
    return scopes


async def stack_of(scopes: WorkScopeController) -> tuple[str, ...]:
    return (await scopes.scope_map()).stack


async def run_body(scopes: WorkScopeController, ops: list[str]) -> None:
    for op in ops:
        if op == "leave":
            await scopes.leave()
        else:
            await scopes.enter(op)


BODIES = {
    "enters another": ["y"],
    "leaves ours": ["leave"],
    "leaves ours, enters another": ["leave", "x"],
    "leaves ours and the caller's": ["leave", "leave"],
    "leaves ours and the caller's, enters another": ["leave", "leave", "x"],
    "leaves the whole caller stack": ["leave", "leave", "leave"],
    "leaves all, enters the caller's in a new order": ["leave", "leave", "leave", "inner", "base"],
    "enters two": ["y", "x"],
}


@pytest.mark.parametrize("ops", list(BODIES.values()), ids=list(BODIES))
async def test_stack_restored_after_a_raising_body(store: SessionStore, ops: list[str]) -> None:
    scopes = await based(store, ("base", "inner"))
    with pytest.raises(RuntimeError, match="body"):
        async with with_work_scope(scopes, {"id": "t", "kind": "task"}):
            await run_body(scopes, ops)
            raise RuntimeError("body")
    assert await stack_of(scopes) == ("base", "inner")


@pytest.mark.parametrize("ops", list(BODIES.values()), ids=list(BODIES))
async def test_unbalanced_body_raises_after_restoring(store: SessionStore, ops: list[str]) -> None:
    scopes = await based(store, ("base", "inner"))
    with pytest.raises(InvalidInputError, match="unbalanced") as caught:
        async with with_work_scope(scopes, {"id": "t", "kind": "task"}):
            await run_body(scopes, ops)
    assert "'t'" in str(caught.value)
    assert await stack_of(scopes) == ("base", "inner")


async def test_balanced_body_is_silent_and_the_stack_is_back(store: SessionStore) -> None:
    scopes = await based(store, ("base",))
    async with with_work_scope(scopes, {"id": "t"}) as sid:
        assert sid == "t" and await stack_of(scopes) == ("base", "t")
        await run_body(scopes, ["x", "leave", "leave", "t"])  # net no change
    assert await stack_of(scopes) == ("base",)


async def test_callable_form_restores_and_propagates(store: SessionStore) -> None:
    scopes = await based(store, ("base",))

    async def body() -> None:
        await run_body(scopes, ["leave", "leave", "x"])
        raise LookupError("fn")

    with pytest.raises(LookupError, match="fn"):
        await with_work_scope(scopes, {"id": "t"}, body)
    assert await stack_of(scopes) == ("base",)


@pytest.mark.parametrize("raising", [True, False], ids=["raise", "no raise"])
async def test_nested_scopes_each_restore_their_own_caller(
    store: SessionStore, raising: bool
) -> None:
    scopes = await based(store, ("base",))
    expected: type[Exception] = RuntimeError if raising else InvalidInputError
    with pytest.raises(expected):
        async with with_work_scope(scopes, {"id": "outer"}):
            with pytest.raises(expected):
                async with with_work_scope(scopes, {"id": "t"}):
                    # Leave both with_work_scope scopes and the caller's, enter another.
                    await run_body(scopes, ["leave", "leave", "leave", "y"])
                    if raising:
                        raise RuntimeError("inner")
            assert await stack_of(scopes) == ("base", "outer")
            await run_body(scopes, ["leave", "x"])
            if raising:
                raise RuntimeError("outer")
    assert await stack_of(scopes) == ("base",)


async def test_empty_caller_stack_is_restored_to_empty(store: SessionStore) -> None:
    scopes = await based(store, ())
    with pytest.raises(RuntimeError):
        async with with_work_scope(scopes, {"id": "t"}):
            await run_body(scopes, ["leave", "x", "y"])
            raise RuntimeError("body")
    assert await stack_of(scopes) == ()
