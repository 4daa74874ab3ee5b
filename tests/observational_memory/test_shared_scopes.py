"""Shared work scopes: owner grants, per-branch folds united by id, access events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from prism_om.core.ledger import ObservationalMemoryLedger
from prism_om.core.scope_map import WorkScopeMap
from prism_om.entries import SessionEntry
from prism_om.errors import InvalidSessionIdError
from prism_om.observational_memory import fold_observational_memory_ledger
from prism_om.observational_memory.scope_controller import (
    WorkScopeController,
    create_work_scope_controller,
)
from prism_om.observational_memory.shared_scopes import (
    BranchEntries,
    ScopeAccessEvent,
    SharedScopeSpec,
    merge_observational_memory_ledgers,
    resolve_shared_scopes,
)
from prism_om.observational_memory.strategy import create_observational_memory_compaction_strategy
from prism_om.session import Session
from prism_om.stores.base import SessionStore

SCOPE = "build-42"


async def member(store: SessionStore, sid: str, prefix: str) -> tuple[Session, list[str]]:
    """A session with observations ``<prefix>000000001..4`` (12 hex) on one message."""
    session = Session(store, sid)
    msg = await session.append_message("user", f"work of {sid}")
    ids = [f"{prefix}{i:09x}" for i in range(1, 5)]
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {
                    "id": oid,
                    "text": f"{sid} fact {oid}",
                    "sourceEntryIds": [msg.id],
                    "observedAt": "2024-05-01T09:00:00Z",
                }
                for oid in ids
            ],
        }
    )
    return session, ids


def ctl(session: Session) -> WorkScopeController:
    return create_work_scope_controller(session=session, append_entry=session.append)


async def setup(store: SessionStore) -> dict[str, Any]:
    """owner opens and grants p1 and p2; each binds ids[0] to the scope, ids[1] elsewhere."""
    owner, o_ids = await member(store, "owner", "aaa")
    p1, p1_ids = await member(store, "p1", "bbb")
    p2, p2_ids = await member(store, "p2", "ccc")
    for session, ids in ((owner, o_ids), (p1, p1_ids), (p2, p2_ids)):
        c = ctl(session)
        await c.open(SCOPE, kind="shared")
        await c.open("private")
        await c.bind(SCOPE, ["om:" + ids[0]])
        await c.bind("private", ["om:" + ids[1]])
    await ctl(owner).grant(SCOPE, ["p1", "p2"])
    return {"owner": owner, "p1": p1, "p2": p2, "o": o_ids, "p1_ids": p1_ids, "p2_ids": p2_ids}


def by_callback(store: SessionStore) -> BranchEntries:
    async def entries(session_id: str) -> Sequence[SessionEntry]:
        return await store.entries(session_id)

    return entries


async def resolve(
    store: SessionStore, reader: str, source: Any = None, **kwargs: Any
) -> tuple[Any, list[ScopeAccessEvent]]:
    events: list[ScopeAccessEvent] = []
    spec = SharedScopeSpec("owner", source if source is not None else by_callback(store))
    result = await resolve_shared_scopes(
        scopes=kwargs.pop("scopes", {SCOPE: spec}),
        principal_id=reader,
        scope_map=kwargs.pop("scope_map", None) or await store.scope_map(reader),
        on_access=events.append,
    )
    return result, events


def ids_of(result: Any, scope: str = SCOPE) -> set[str]:
    return {o.id for o in result.memory[scope].observations}


async def test_participant_reads_owner_and_peers_bound_memory(store: SessionStore) -> None:
    s = await setup(store)
    result, events = await resolve(store, "p1")
    assert ids_of(result) == {s["o"][0], s["p2_ids"][0]}  # only ids bound to this scope
    assert result.memory[SCOPE].contributors == ("owner", "p2")
    assert events == [ScopeAccessEvent(SCOPE, "p1", True, "granted", "owner")]
    assert {o.id for o in result.ledger.observations} == ids_of(result)


async def test_owner_reads_granted_participants(store: SessionStore) -> None:
    s = await setup(store)
    result, events = await resolve(store, "owner")
    assert ids_of(result) == {s["p1_ids"][0], s["p2_ids"][0]}
    assert events[0].reason == "owner" and events[0].granted


async def test_a_store_source_equals_the_callback(store: SessionStore) -> None:
    await setup(store)
    via_callback, _ = await resolve(store, "p1")
    via_store, _ = await resolve(store, "p1", source=store)
    assert via_store.memory == via_callback.memory


async def test_revoke_lands_on_the_next_resolve(store: SessionStore) -> None:
    s = await setup(store)
    assert (await resolve(store, "p1"))[0].memory
    await ctl(s["owner"]).revoke(SCOPE, ["p1"])
    result, events = await resolve(store, "p1")
    assert result.memory == {}
    assert events == [ScopeAccessEvent(SCOPE, "p1", False, "revoked", "owner")]
    # The owner no longer reads the revoked participant either.
    assert ids_of((await resolve(store, "owner"))[0]) == {s["p2_ids"][0]}


async def test_never_granted(store: SessionStore) -> None:
    await setup(store)
    stranger, _ = await member(store, "p3", "ddd")
    await ctl(stranger).open(SCOPE)
    result, events = await resolve(store, "p3")
    assert result.memory == {} and events[0].reason == "not_granted" and not events[0].granted


async def test_grants_in_other_branches_are_inert(store: SessionStore) -> None:
    s = await setup(store)
    stranger, _ = await member(store, "p3", "ddd")
    await ctl(stranger).open(SCOPE)
    # p1 opened its own copy of the scope and grants p3 there: that grant carries no weight.
    await ctl(s["p1"]).grant(SCOPE, ["p3"])
    _, events = await resolve(store, "p3")
    assert events[0].reason == "not_granted"


async def test_not_opened_locally(store: SessionStore) -> None:
    await setup(store)
    await member(store, "p4", "eee")
    await ctl(Session(store, "owner")).grant(SCOPE, ["p4"])
    result, events = await resolve(store, "p4")
    assert result.memory == {} and events[0].reason == "not_opened_locally"


async def test_absent_in_the_owner_branch(store: SessionStore) -> None:
    s = await setup(store)
    await ctl(s["p1"]).open("elsewhere")
    spec = SharedScopeSpec("owner", by_callback(store))
    _, events = await resolve(store, "p1", scopes={"elsewhere": spec})
    assert events[0].reason == "absent"


async def test_unknown_scope_ids(store: SessionStore) -> None:
    await setup(store)
    spec = SharedScopeSpec("owner", by_callback(store))
    _, events = await resolve(store, "p1", scopes={"a..b": spec, "session": spec})
    assert [e.reason for e in events] == ["unknown", "unknown"]


@pytest.mark.parametrize("failure", ["raises", "empty", "none"])
async def test_unreachable_owner(store: SessionStore, failure: str) -> None:
    await setup(store)

    async def entries(session_id: str) -> Any:
        if failure == "raises":
            raise OSError("tenant offline")
        return [] if failure == "empty" else None

    result, events = await resolve(store, "p1", source=entries)
    assert result.memory == {} and events[0].reason == "unreachable"


async def test_unreachable_store_owner(store: SessionStore) -> None:
    await setup(store)
    spec = SharedScopeSpec("nobody", store)
    _, events = await resolve(store, "p1", scopes={SCOPE: spec})
    assert events[0].reason == "unreachable"


async def test_unreachable_participant_contributes_nothing(store: SessionStore) -> None:
    s = await setup(store)
    inner = by_callback(store)

    async def entries(session_id: str) -> Sequence[SessionEntry]:
        if session_id == "p2":
            raise OSError("p2 offline")
        return await inner(session_id)

    result, _ = await resolve(store, "p1", source=entries)
    assert ids_of(result) == {s["o"][0]} and result.memory[SCOPE].contributors == ("owner",)


async def test_on_access_fires_for_every_decision(store: SessionStore) -> None:
    await setup(store)
    seen: list[ScopeAccessEvent] = []

    async def audit(event: ScopeAccessEvent) -> None:
        seen.append(event)

    spec = SharedScopeSpec("owner", by_callback(store))
    result = await resolve_shared_scopes(
        scopes={SCOPE: spec, "private": spec, "nope": spec},
        principal_id="p1",
        scope_map=await store.scope_map("p1"),
        on_access=audit,
    )
    assert [(e.scope_id, e.granted, e.reason) for e in seen] == [
        (SCOPE, True, "granted"),
        ("private", False, "not_granted"),
        ("nope", False, "not_opened_locally"),
    ]
    assert result.events == tuple(seen)


async def test_dropped_and_unbound_memory_is_not_shared(store: SessionStore) -> None:
    s = await setup(store)
    await s["p2"].append_custom(
        {"type": "om.observations.dropped", "observationIds": [s["p2_ids"][0]]}
    )
    await ctl(s["owner"]).unbind(SCOPE, ["om:" + s["o"][0]])
    result, _ = await resolve(store, "p1")
    assert ids_of(result) == set()


async def test_the_local_folded_payload_stays_local(store: SessionStore) -> None:
    s = await setup(store)
    assert (await resolve(store, "p1"))[0].memory
    entries = await s["p1"].entries()
    plan = create_observational_memory_compaction_strategy().plan(entries)
    assert {o["id"] for o in plan.memory["observations"]} == set(s["p1_ids"])


async def test_reader_must_be_a_session_id(store: SessionStore) -> None:
    with pytest.raises(InvalidSessionIdError):
        await resolve_shared_scopes(scopes={}, principal_id="a/b", scope_map=WorkScopeMap())


async def test_merge_unites_by_id(store: SessionStore) -> None:
    a, a_ids = await member(store, "a", "aaa")
    b = Session(store, "b")
    msg = await b.append_message("user", "b")
    clash = {
        "id": a_ids[0],
        "text": "b's own text under a's id",
        "sourceEntryIds": [msg.id],
        "observedAt": "2024-05-01T10:00:00Z",
    }
    await b.append_custom({"type": "om.observations.recorded", "observations": [clash]})
    await b.append_custom({"type": "om.observations.dropped", "observationIds": [a_ids[0]]})
    la = fold_observational_memory_ledger(await a.entries())
    lb = fold_observational_memory_ledger(await b.entries())
    merged = merge_observational_memory_ledgers([la, lb])
    assert [o.id for o in merged.observations] == a_ids  # the first record of an id wins
    assert merged.observations[0].observation.text.startswith("a fact")
    assert merged.dropped_observation_ids == (a_ids[0],)
    assert merged.observation_coverage is None and merged.last_observations_entry_id is None
    assert merge_observational_memory_ledgers([]) == ObservationalMemoryLedger()
