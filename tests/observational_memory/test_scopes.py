"""The work-scope index: fold, controller rules, projection, scoped rendering, with_work_scope."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.core.render import render_observational_memory
from prism_om.core.scope_map import (
    MAX_BINDS_PER_SCOPE,
    MAX_PRINCIPALS_PER_SCOPE,
    MAX_SCOPE_DEPTH,
    MAX_SCOPE_STACK,
    MAX_SCOPES,
    ROOT_SCOPE_ID,
    WorkScopeMap,
    fold_work_scope_map,
    is_scope_id,
    memory_ref,
    parse_memory_ref,
)
from prism_om.core.work_memory import project_work_memory
from prism_om.entries import SessionEntry, custom_entry
from prism_om.errors import (
    InvalidIdError,
    InvalidInputError,
    InvalidSessionIdError,
    LimitExceededError,
    MemoryRecordError,
    ScopeDeniedError,
)
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    fold_observational_memory_ledger,
)
from prism_om.observational_memory.scope_controller import (
    WorkScopeController,
    create_work_scope_controller,
    with_work_scope,
)
from prism_om.observational_memory.strategy import create_observational_memory_compaction_strategy
from prism_om.session import Session
from prism_om.stores.base import SessionStore
from prism_om.testing.conformance import snapshot

SID = "s1"
OBS = [f"{i:012x}" for i in range(1, 7)]  # 000000000001 ...
REFL = "abcdefabcdef"


async def seed(store: SessionStore, session_id: str = SID, obs: list[str] = OBS) -> Session:
    """A session with one message, observations ``obs`` and one reflection over the first."""
    session = Session(store, session_id)
    msg = await session.append_message("user", "we migrate billing to postgres")
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": oid,
                    "text": f"fact {oid}",
                    "sourceEntryIds": [msg.id],
                    "observedAt": "2024-05-01T09:00:00Z",
                }
                for oid in obs
            ],
            # Covered, as an observer run covers what it read: the message is then out of
            # the request window once newer ones follow, and its observations render.
            "coversUpToId": msg.id,
        }
    )
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [{"id": REFL, "text": "big picture", "observationIds": [obs[0]]}],
        }
    )
    return session


def controller(session: Session, **kwargs: Any) -> WorkScopeController:
    return create_work_scope_controller(session=session, append_entry=session.append, **kwargs)


async def refused(
    store: SessionStore,
    call: Awaitable[object],
    error: type[Exception],
    match: str | None = None,
) -> None:
    """The call raises ``error`` and the store is exactly as before."""
    before = await snapshot(store)
    with pytest.raises(error, match=match):
        await call
    assert await snapshot(store) == before


async def raw(session: Session, data: dict[str, Any]) -> None:
    """Append a scope record directly, bypassing the controller (to reach caps quickly)."""
    await session.append_custom(data)


# -- the fold ----------------------------------------------------------------------------


def test_empty_branch_has_only_the_root() -> None:
    scopes = fold_work_scope_map([])
    assert list(scopes.scopes) == [ROOT_SCOPE_ID]
    assert scopes.current == ROOT_SCOPE_ID and not scopes.has_host_scopes
    assert scopes == WorkScopeMap()


def _records(*datas: dict[str, Any]) -> list[SessionEntry]:
    out: list[SessionEntry] = []
    for i, data in enumerate(datas):
        out.append(custom_entry(SID, data, parent_id=out[-1].id if out else None, entry_id=f"e{i}"))
    return out


def test_fold_builds_tree_stack_binds_and_grants() -> None:
    ref = memory_ref("observation", OBS[0])
    scopes = fold_work_scope_map(
        _records(
            {"type": "om.scope.opened", "id": "plan", "kind": "plan", "label": "Plan"},
            {"type": "om.scope.opened", "id": "task", "parentId": "plan"},
            {"type": "om.scope.entered", "scopeId": "plan"},
            {"type": "om.scope.entered", "scopeId": "task"},
            {"type": "om.scope.bound", "scopeId": "task", "refs": [ref]},
            {"type": "om.scope.bound", "scopeId": "plan", "refs": [ref]},
            {"type": "om.scope.granted", "scopeId": "plan", "principalIds": ["s2", "s3"]},
            {"type": "om.scope.revoked", "scopeId": "plan", "principalIds": ["s2"]},
            {"type": "om.scope.left"},
        )
    )
    assert scopes.stack == ("plan",) and scopes.current == "plan"
    assert scopes.ancestors("task") == ["plan", ROOT_SCOPE_ID]
    assert scopes.descendants(ROOT_SCOPE_ID) == ["plan", "task"]
    assert scopes.scopes_of(ref) == ["plan", "task"]
    assert scopes.scopes_of(memory_ref("observation", OBS[1])) == [ROOT_SCOPE_ID]
    plan = scopes.scopes["plan"]
    assert (plan.kind, plan.label, plan.opened_entry_id, plan.depth) == ("plan", "Plan", "e0", 1)
    assert plan.principals == ("s3",) and plan.revoked_principals == ("s2",)
    assert scopes.scopes["task"].depth == 2


def test_fold_ignores_what_it_cannot_apply() -> None:
    scopes = fold_work_scope_map(
        _records(
            {"type": "om.scope.left"},
            {"type": "om.scope.opened", "id": "a..b"},
            {"type": "om.scope.opened", "id": ROOT_SCOPE_ID},
            {"type": "om.scope.opened", "id": "x", "parentId": "ghost"},
            {"type": "om.scope.opened", "id": "t"},
            {"type": "om.scope.opened", "id": "t", "label": "dup"},
            {"type": "om.scope.entered", "scopeId": ROOT_SCOPE_ID},
            {"type": "om.scope.closed", "scopeId": "t"},
            {"type": "om.scope.entered", "scopeId": "t"},
            {"type": "om.scope.opened", "id": "u", "parentId": "t"},
            {"type": "om.scope.bound", "scopeId": "t", "refs": ["om:" + OBS[0]]},
            {"type": "om.scope.bound", "scopeId": ROOT_SCOPE_ID, "refs": ["bad", 3]},
            {"type": "om.scope.granted", "scopeId": ROOT_SCOPE_ID, "principalIds": ["s2"]},
            {"type": "om.scope.granted", "scopeId": "t", "principalIds": ["s2"]},
            {"type": "om.scope.revoked", "scopeId": "t", "principalIds": ["s9"]},
            {"type": "om.scope.bogus", "scopeId": "t"},
        )
    )
    assert list(scopes.scopes) == [ROOT_SCOPE_ID, "t"]
    assert scopes.stack == ()
    t = scopes.scopes["t"]
    assert t.closed and t.label is None and t.binds == () and t.principals == ()
    assert t.revoked_principals == ()
    assert scopes.root.binds == () and scopes.root.principals == ()


def test_fold_keeps_its_caps() -> None:
    chain = [{"type": "om.scope.opened", "id": "d1"}] + [
        {"type": "om.scope.opened", "id": f"d{i}", "parentId": f"d{i - 1}"}
        for i in range(2, MAX_SCOPE_DEPTH + 3)
    ]
    scopes = fold_work_scope_map(_records(*chain))
    assert max(s.depth for s in scopes.scopes.values()) == MAX_SCOPE_DEPTH
    many = [{"type": "om.scope.opened", "id": f"s{i}"} for i in range(MAX_SCOPES + 5)]
    assert len(fold_work_scope_map(_records(*many)).scopes) == MAX_SCOPES + 1
    enters = [{"type": "om.scope.opened", "id": "t"}] + [
        {"type": "om.scope.entered", "scopeId": "t"} for _ in range(MAX_SCOPE_STACK + 3)
    ]
    assert len(fold_work_scope_map(_records(*enters)).stack) == MAX_SCOPE_STACK


def test_scope_ids_and_refs() -> None:
    assert is_scope_id("plan:memory/task-1.a_b")
    for bad in ("", "a" * 129, "a..b", "sp ace", "é", None, 3):
        assert not is_scope_id(bad)
    assert parse_memory_ref("om:" + OBS[0]) == ("observation", OBS[0])
    assert parse_memory_ref("reflection:" + REFL) == ("reflection", REFL)
    for bad in ("om:ABCDEFABCDEF", "obs:" + REFL, "om:" + REFL + "0", None):
        assert parse_memory_ref(bad) is None


# -- the controller: the happy path -----------------------------------------------------


async def test_each_operation_appends_one_record_at_the_leaf(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    ops: list[tuple[Awaitable[SessionEntry], str]] = [
        (scopes.open("plan", kind="plan", label="Plan"), "om.scope.opened"),
        (scopes.open("task", parent_id="plan", kind="task"), "om.scope.opened"),
        (scopes.enter("task"), "om.scope.entered"),
        (scopes.bind("task", ["om:" + OBS[0], "reflection:" + REFL]), "om.scope.bound"),
        (scopes.unbind("task", ["reflection:" + REFL]), "om.scope.unbound"),
        (scopes.grant("plan", ["s2"]), "om.scope.granted"),
        (scopes.revoke("plan", ["s2"]), "om.scope.revoked"),
        (scopes.leave(), "om.scope.left"),
        (scopes.close("task"), "om.scope.closed"),
    ]
    for call, marker in ops:
        before = len(await store.list(SID))
        leaf = await session.leaf()
        entry = await call
        assert len(await store.list(SID)) == before + 1
        assert entry.custom_type == marker and entry.parent_id == leaf
        assert await session.leaf() == entry.id
    folded = await store.scope_map(SID)
    assert folded == fold_work_scope_map(await session.entries())
    assert folded.scopes["task"].closed and folded.scopes["task"].binds == ("om:" + OBS[0],)
    assert folded.scopes["plan"].revoked_principals == ("s2",)
    assert (await store.list(SID))[3].data == {
        "type": "om.scope.opened",
        "id": "plan",
        "kind": "plan",
        "label": "Plan",
    }


async def test_labels_and_kinds_are_redacted(store: SessionStore) -> None:
    session = await seed(store)
    await controller(session, secrets=["sk-123456"]).open(
        "t", kind="k sk-123456", label="key sk-123456 here"
    )
    scope = (await store.scope_map(SID)).scopes["t"]
    assert scope.label == "key [REDACTED] here" and scope.kind == "k [REDACTED]"


# -- the controller: every rule fails closed --------------------------------------------


@pytest.mark.parametrize("bad", ["", "a" * 129, "a..b", "has space", "é", "x\n"])
async def test_invalid_scope_id(store: SessionStore, bad: str) -> None:
    session = await seed(store)
    await refused(store, controller(session).open(bad), InvalidIdError)


async def test_reserved_root_id(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await refused(store, scopes.open(ROOT_SCOPE_ID), InvalidIdError, "reserved")
    await refused(store, scopes.enter(ROOT_SCOPE_ID), InvalidIdError)
    await refused(store, scopes.close(ROOT_SCOPE_ID), InvalidIdError)


async def test_scope_count_cap(store: SessionStore) -> None:
    session = await seed(store)
    for i in range(MAX_SCOPES):
        await raw(session, {"type": "om.scope.opened", "id": f"s{i}"})
    assert len((await store.scope_map(SID)).scopes) == MAX_SCOPES + 1
    await refused(store, controller(session).open("one-more"), LimitExceededError, "256")


async def test_depth_cap(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    parent = None
    for i in range(MAX_SCOPE_DEPTH):
        await scopes.open(f"d{i}", parent_id=parent)
        parent = f"d{i}"
    await refused(store, scopes.open("too-deep", parent_id=parent), LimitExceededError, "depth")


async def test_stack_cap(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("t")
    for _ in range(MAX_SCOPE_STACK):
        await scopes.enter("t")
    await refused(store, scopes.enter("t"), LimitExceededError, "stack")


async def test_binds_cap(store: SessionStore) -> None:
    session = await seed(store)
    await controller(session).open("t")
    fillers = [f"om:{i:012x}" for i in range(10**6, 10**6 + MAX_BINDS_PER_SCOPE)]
    await raw(session, {"type": "om.scope.bound", "scopeId": "t", "refs": fillers})
    assert len((await store.scope_map(SID)).scopes["t"].binds) == MAX_BINDS_PER_SCOPE
    await refused(
        store, controller(session).bind("t", ["om:" + OBS[0]]), LimitExceededError, "4096"
    )


async def test_principals_cap(store: SessionStore) -> None:
    session = await seed(store)
    await controller(session).open("t")
    fillers = [f"p{i}" for i in range(MAX_PRINCIPALS_PER_SCOPE)]
    await raw(session, {"type": "om.scope.granted", "scopeId": "t", "principalIds": fillers})
    await refused(store, controller(session).grant("t", ["late"]), LimitExceededError, "1024")


@pytest.mark.parametrize("field", ["kind", "label"])
async def test_text_cap(store: SessionStore, field: str) -> None:
    session = await seed(store)
    await controller(session).open("ok", **{field: "x" * 512})
    await refused(store, controller(session).open("t", **{field: "x" * 513}), LimitExceededError)


async def test_text_cap_counts_the_redacted_text(store: SessionStore) -> None:
    session = await seed(store)
    label = "ab " * 170  # 510 characters; each "ab" grows to "[REDACTED]"
    await refused(
        store, controller(session, secrets=["ab"]).open("t", label=label), LimitExceededError
    )


async def test_missing_parent(store: SessionStore) -> None:
    session = await seed(store)
    await refused(store, controller(session).open("t", parent_id="ghost"), InvalidInputError)


async def test_closed_parent(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("p")
    await scopes.close("p")
    await refused(store, scopes.open("t", parent_id="p"), InvalidInputError, "closed")


async def test_duplicate_scope(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("t")
    await refused(store, scopes.open("t"), InvalidInputError, "already")
    await scopes.close("t")
    await refused(store, scopes.open("t"), InvalidInputError, "already")


async def test_unknown_record_ids(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("t")
    await refused(store, scopes.bind("t", ["om:ffffffffffff"]), MemoryRecordError)
    # An observation ref must name an observation, a reflection ref a reflection.
    await refused(store, scopes.bind("t", ["om:" + REFL]), MemoryRecordError)
    await refused(store, scopes.bind("t", ["reflection:" + OBS[0]]), MemoryRecordError)
    await refused(store, scopes.bind("t", ["nope"]), InvalidIdError)


async def test_bind_ref_must_be_on_this_branch(store: SessionStore) -> None:
    await seed(store, "other", obs=["0000000000aa"])
    session = await seed(store)
    await controller(session).open("t")
    await refused(store, controller(session).bind("t", ["om:0000000000aa"]), MemoryRecordError)


async def test_grant_on_reserved_root(store: SessionStore) -> None:
    session = await seed(store)
    await refused(store, controller(session).grant(ROOT_SCOPE_ID, ["s2"]), ScopeDeniedError)
    await refused(store, controller(session).revoke(ROOT_SCOPE_ID, ["s2"]), ScopeDeniedError)


async def test_grant_on_closed_scope(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("t")
    await scopes.grant("t", ["s2"])
    await scopes.close("t")
    await refused(store, scopes.grant("t", ["s3"]), ScopeDeniedError, "closed")
    await scopes.revoke("t", ["s2"])  # withdrawing access stays possible


@pytest.mark.parametrize("bad", ["", "a/b", "..", "a..b", "-lead", "x" * 129])
async def test_principal_must_be_a_session_id(store: SessionStore, bad: str) -> None:
    session = await seed(store)
    await controller(session).open("t")
    await refused(store, controller(session).grant("t", [bad]), InvalidSessionIdError)


async def test_ownership_mismatch_scope_not_opened(store: SessionStore) -> None:
    owner = await seed(store, "owner", obs=["0000000000aa"])
    await controller(owner).open("shared")
    session = await seed(store)
    await refused(store, controller(session).grant("shared", ["s2"]), ScopeDeniedError, "did not")
    await refused(store, controller(session).revoke("shared", ["s2"]), ScopeDeniedError)


async def test_ownership_mismatch_declared_owner(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session, owners={"shared": "owner"})
    await scopes.open("shared")  # participants open shared scopes locally
    await refused(store, scopes.grant("shared", ["s2"]), ScopeDeniedError, "owned by")
    await refused(store, scopes.revoke("shared", ["s2"]), ScopeDeniedError, "owned by")
    await controller(session, owners={"shared": SID}).grant("shared", ["s2"])


async def test_state_rules(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("t")
    await refused(store, scopes.leave(), InvalidInputError, "empty")
    await refused(store, scopes.enter("ghost"), InvalidInputError)
    await refused(store, scopes.close("ghost"), InvalidInputError)
    await refused(store, scopes.bind("ghost", ["om:" + OBS[0]]), InvalidInputError)
    await refused(store, scopes.unbind("t", ["om:" + OBS[0]]), InvalidInputError, "not bound")
    await refused(store, scopes.revoke("t", ["s2"]), InvalidInputError, "no grant")
    await refused(store, scopes.bind("t", []), InvalidInputError, "empty")
    await refused(store, scopes.bind("t", ["om:" + OBS[0]] * 2), InvalidInputError, "twice")
    await refused(
        store, scopes.grant("t", "s2"), InvalidInputError
    )  # a str is one value, not a list
    await scopes.close("t")
    await refused(store, scopes.close("t"), InvalidInputError, "closed")
    await refused(store, scopes.enter("t"), InvalidInputError, "closed")
    await refused(store, scopes.bind("t", ["om:" + OBS[0]]), InvalidInputError, "closed")


async def test_owners_option_is_validated() -> None:
    class _Fake:
        store: Any = None
        id = SID

    async def append(entry: SessionEntry) -> None:
        raise AssertionError("never called")

    with pytest.raises(InvalidIdError):
        create_work_scope_controller(session=_Fake(), append_entry=append, owners={"a..b": "x"})


# -- projection ----------------------------------------------------------------------------


async def _scoped_session(store: SessionStore) -> tuple[Session, WorkScopeController]:
    """plan > task-a (entered, holds OBS[1]) and task-b (closed, holds OBS[2]); other> OBS[3]."""
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("plan", kind="plan", label="Memory work")
    await scopes.open("task-a", parent_id="plan", kind="task")
    await scopes.open("task-b", parent_id="plan", kind="task")
    await scopes.open("other", kind="plan")
    await scopes.bind("plan", ["om:" + OBS[0], "reflection:" + REFL])
    await scopes.bind("task-a", ["om:" + OBS[1]])
    await scopes.bind("task-b", ["om:" + OBS[2]])
    await scopes.bind("other", ["om:" + OBS[3]])
    await scopes.close("task-b")
    await scopes.enter("plan")
    await scopes.enter("task-a")
    return session, scopes


def _ids(projection: Any) -> set[str]:
    return {o.id for o in projection.observations} | {r.id for r in projection.reflections}


async def test_projection_include_modes(store: SessionStore) -> None:
    await _scoped_session(store)
    ledger, scopes = await store.ledger(SID), await store.scope_map(SID)
    unbound = {OBS[4], OBS[5]}  # bound nowhere: the root's
    default = project_work_memory(ledger, scopes)
    assert default.from_scope == "task-a"
    assert _ids(default) == {OBS[0], REFL, OBS[1]} | unbound
    assert _ids(project_work_memory(ledger, scopes, include="self")) == {OBS[1]}
    plan_down = project_work_memory(ledger, scopes, from_="plan", include="self+descendants")
    assert _ids(plan_down) == {OBS[0], REFL, OBS[1]}  # task-b is closed: hidden
    shown = project_work_memory(
        ledger, scopes, from_="plan", include="self+descendants", closed="include"
    )
    assert _ids(shown) == {OBS[0], REFL, OBS[1], OBS[2]}
    lineage = project_work_memory(ledger, scopes, from_="plan", include="lineage")
    assert _ids(lineage) == {OBS[0], REFL, OBS[1]} | unbound
    assert _ids(project_work_memory(ledger, scopes, from_=ROOT_SCOPE_ID)) == unbound
    everything = project_work_memory(ledger, scopes, from_=ROOT_SCOPE_ID, include="lineage")
    assert _ids(everything) == {OBS[0], REFL, OBS[1], OBS[3]} | unbound


async def test_projection_keeps_closed_ancestors(store: SessionStore) -> None:
    _, scopes = await _scoped_session(store)
    await scopes.close("plan")
    projection = project_work_memory(await store.ledger(SID), await store.scope_map(SID))
    assert OBS[0] in _ids(projection) and "plan (plan) Memory work [closed]" in projection.outline


async def test_projection_kinds_filter(store: SessionStore) -> None:
    await _scoped_session(store)
    ledger, scopes = await store.ledger(SID), await store.scope_map(SID)
    assert _ids(project_work_memory(ledger, scopes, kinds=["task"])) == {OBS[1]}
    plans = project_work_memory(ledger, scopes, kinds=["plan", "session"])
    assert _ids(plans) == {OBS[0], REFL, OBS[4], OBS[5]}


async def test_projection_is_active_only(store: SessionStore) -> None:
    session, _ = await _scoped_session(store)
    await session.append_custom({"type": "om.observations.dropped", "observationIds": [OBS[1]]})
    projection = project_work_memory(await store.ledger(SID), await store.scope_map(SID))
    assert OBS[1] not in _ids(projection)
    withheld = project_work_memory(
        await store.ledger(SID), await store.scope_map(SID), invalidated_ids={OBS[0]}
    )
    assert OBS[0] not in _ids(withheld) and REFL not in _ids(withheld)


async def test_projection_outline_and_errors(store: SessionStore) -> None:
    await _scoped_session(store)
    ledger, scopes = await store.ledger(SID), await store.scope_map(SID)
    assert project_work_memory(ledger, scopes).outline == (
        "- session\n  - plan (plan) Memory work\n    - task-a (task) [current]\n  - other (plan)"
    )
    outline = project_work_memory(ledger, scopes, closed="include").outline
    assert "    - task-b (task) [closed]" in outline
    with pytest.raises(InvalidInputError):
        project_work_memory(ledger, scopes, from_="ghost")
    with pytest.raises(InvalidInputError):
        project_work_memory(ledger, scopes, include="all")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        project_work_memory(ledger, scopes, closed="show")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        project_work_memory(ledger, scopes, kinds="task")


# -- scoped context blocks and compaction summaries ------------------------------------


async def test_context_without_scopes_is_unchanged(store: SessionStore) -> None:
    session = await seed(store)
    await session.append_message("user", "later")
    entries = await session.entries()
    blocks = build_observational_memory_context_blocks(entries, keep_recent_entries=1)
    assert "Scope outline" not in blocks[0].text
    assert len(blocks[0].memory_ids) == len(OBS) + 1
    stored = await build_observational_memory_context_blocks(
        store, session_id=SID, keep_recent_entries=1
    )
    assert stored == blocks


async def test_context_renders_the_scoped_projection(store: SessionStore) -> None:
    session, _ = await _scoped_session(store)
    await session.append_message("user", "later")
    entries = await session.entries()
    blocks = build_observational_memory_context_blocks(entries, keep_recent_entries=1)
    text = blocks[0].text
    assert (
        text.index("## Scope outline")
        < text.index("## Reflections")
        < text.index("## Observations")
    )
    assert set(blocks[0].memory_ids) == {REFL, OBS[0], OBS[1], OBS[4], OBS[5]}
    assert OBS[2] not in text and OBS[3] not in text
    stored = await build_observational_memory_context_blocks(
        store, session_id=SID, keep_recent_entries=1
    )
    assert stored == blocks
    # An explicit map wins: the map with only the root renders the whole pool.
    whole = build_observational_memory_context_blocks(
        entries, keep_recent_entries=1, scope_map=WorkScopeMap()
    )
    assert len(whole[0].memory_ids) == len(OBS) + 1


async def test_compaction_summary_is_scoped_but_payload_is_whole(store: SessionStore) -> None:
    session, _ = await _scoped_session(store)
    await session.append_message("user", "later")
    entries = await session.entries()
    strategy = create_observational_memory_compaction_strategy(keep_recent_entries=1)
    plan = strategy.plan(entries)
    assert "## Scope outline" in plan.summary and "[current]" in plan.summary
    assert OBS[3] not in plan.summary and OBS[1] in plan.summary
    assert {o["id"] for o in plan.memory["observations"]} == set(OBS)
    entry = strategy.compact(entries, session_id=SID)
    assert entry.summary == plan.summary
    unscoped = strategy.plan(entries, scope_map=WorkScopeMap())
    ledger = fold_observational_memory_ledger(entries)
    assert unscoped.summary == render_observational_memory(
        [r.reflection for r in ledger.reflections], [o.observation for o in ledger.observations]
    )


# -- with_work_scope -----------------------------------------------------------------------


async def test_with_work_scope_opens_enters_and_leaves(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    await scopes.open("plan")
    async with with_work_scope(scopes, {"id": "task", "parent_id": "plan", "kind": "task"}) as sid:
        inside = await store.scope_map(SID)
        assert sid == "task" and inside.current == "task"
        assert inside.scopes["task"].parent_id == "plan"
    after = await store.scope_map(SID)
    assert after.stack == () and not after.scopes["task"].closed

    async def work() -> str:
        return (await store.scope_map(SID)).current

    assert await with_work_scope(scopes, {"id": "task"}, work) == "task"  # reused, not reopened
    markers = [e.custom_type for e in await store.list(SID)]
    assert markers.count("om.scope.opened") == 2 and "om.scope.closed" not in markers


async def test_with_work_scope_leaves_on_error(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)

    async def boom() -> None:
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        await with_work_scope(scopes, {"id": "task"}, boom)
    assert (await store.scope_map(SID)).stack == ()


async def test_with_work_scope_rejects_bad_specs(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    with pytest.raises(InvalidInputError):
        with_work_scope(scopes, {"name": "x"})  # type: ignore[call-overload]
    await scopes.open("done")
    await scopes.close("done")
    before = await snapshot(store)
    with pytest.raises(InvalidInputError, match="closed"):
        async with with_work_scope(scopes, {"id": "done"}):
            raise AssertionError("never entered")
    assert await snapshot(store) == before


async def test_with_work_scope_reports_an_unbalanced_body(store: SessionStore) -> None:
    session = await seed(store)
    scopes = controller(session)
    with pytest.raises(InvalidInputError, match="unbalanced"):
        async with with_work_scope(scopes, {"id": "task"}):
            await scopes.leave()


_IDS = st.sampled_from(["a", "b", "c", "a/b", "session", "x..y", "", 7])
_REFS = st.lists(st.sampled_from(["om:" + OBS[0], "reflection:" + REFL, "bad", 3]), max_size=3)
_PRINCIPALS = st.lists(st.sampled_from(["s2", "s3", "a/b", "", None]), max_size=3)
_RECORDS = st.one_of(
    st.fixed_dictionaries(
        {"type": st.just("om.scope.opened"), "id": _IDS},
        optional={"parentId": _IDS, "kind": st.text(max_size=3), "label": st.none()},
    ),
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["om.scope.closed", "om.scope.entered", "om.scope.left"]),
            "scopeId": _IDS,
        }
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["om.scope.bound", "om.scope.unbound"]), "scopeId": _IDS},
        optional={"refs": _REFS},
    ),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["om.scope.granted", "om.scope.revoked"]), "scopeId": _IDS},
        optional={"principalIds": _PRINCIPALS},
    ),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_RECORDS, max_size=30))
def test_fold_never_raises_and_keeps_its_invariants(records: list[dict[str, Any]]) -> None:
    entries = _records(*records)
    scopes = fold_work_scope_map(entries)
    assert scopes == fold_work_scope_map(entries)  # deterministic, ==-comparable
    assert next(iter(scopes.scopes)) == ROOT_SCOPE_ID and not scopes.root.closed
    for scope in scopes.scopes.values():
        assert all(parse_memory_ref(r) for r in scope.binds)
        if scope.is_root:
            assert scope.principals == () and scope.depth == 0
            continue
        parent = scopes.scopes[scope.parent_id or ""]
        assert is_scope_id(scope.id) and scope.id != ROOT_SCOPE_ID
        assert scope.depth == parent.depth + 1 <= MAX_SCOPE_DEPTH
        assert not set(scope.principals) & set(scope.revoked_principals)
    assert len(scopes.stack) <= MAX_SCOPE_STACK
    assert all(s in scopes.scopes and s != ROOT_SCOPE_ID for s in scopes.stack)
