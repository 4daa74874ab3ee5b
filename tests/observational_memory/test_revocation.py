"""Revocation: tombstones in the store, the drop handler, and the read path agreeing."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from support.revocation_story import story

from prism_om.core.context_blocks import MEMORY_BLOCK_NAME, ContextBlock
from prism_om.core.projection import active_memory
from prism_om.core.records import OBSERVATIONS_DROPPED
from prism_om.entries import SessionEntry
from prism_om.errors import (
    BranchMismatchError,
    InvalidIdError,
    InvalidInputError,
    InvalidSessionIdError,
)
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    fold_observational_memory_ledger,
)
from prism_om.observational_memory.revocation import (
    TOMBSTONES_RECORDED,
    TombstoneSet,
    create_deletion_propagator,
    create_observational_memory_drop_handler,
    list_invalidated_ids,
)
from prism_om.session import Session
from prism_om.stores.base import SessionStore
from prism_om.testing.conformance import StoreOpener, snapshot
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder


def memory_text(blocks: Sequence[ContextBlock]) -> str:
    return next((b.text for b in blocks if b.name == MEMORY_BLOCK_NAME), "")


async def test_no_tombstones_is_empty(store: SessionStore) -> None:
    assert await list_invalidated_ids(store, "docs") == frozenset()


async def test_tombstones_persist_per_scope_and_reason(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        propagate = create_deletion_propagator(store, [])
        first = await propagate.propagate("docs", ["e1", "e2"], reason="revoked")
        assert first.ids == {"e1", "e2"} and first.entry_id is not None
        await propagate.propagate("docs", ["e3"], reason="corrected")
        await propagate.propagate("docs", ["e4", "e2"], reason="deleted")
        await propagate.propagate("other", ["e9"], reason="revoked")
        assert await list_invalidated_ids(store, "docs") == {"e1", "e2", "e4"}
        assert await list_invalidated_ids(store, "other") == {"e9"}
        chain = await store.list("tombstones.docs")
        assert [e.custom_type for e in chain] == [TOMBSTONES_RECORDED] * 3
        # Chained in order: each record's parent is the one before.
        assert [e.parent_id for e in chain] == [None, chain[0].id, chain[1].id]
    finally:
        await store.close()
    if store_opener.persistent:
        reopened = await store_opener.open()
        try:
            assert await list_invalidated_ids(reopened, "docs") == {"e1", "e2", "e4"}
        finally:
            await reopened.close()


async def test_propagate_fails_closed_before_writing(store: SessionStore) -> None:
    calls: list[TombstoneSet] = []

    async def handler(tombstones: TombstoneSet) -> None:
        calls.append(tombstones)

    propagate = create_deletion_propagator(store, [handler])
    before = await snapshot(store)
    for scope, ids, reason, error in [
        ("bad/scope", ["e1"], "revoked", InvalidSessionIdError),
        ("..", ["e1"], "revoked", InvalidSessionIdError),
        ("x" * 128, ["e1"], "revoked", InvalidSessionIdError),
        ("docs", ["e1"], "forgotten", InvalidInputError),
        ("docs", "e1", "revoked", InvalidInputError),
        ("docs", ["", "e1"], "revoked", InvalidIdError),
        ("docs", [7], "revoked", InvalidIdError),
    ]:
        with pytest.raises(error):
            await propagate(scope, ids, reason=reason)  # type: ignore[arg-type]
    with pytest.raises(InvalidSessionIdError):
        await list_invalidated_ids(store, "bad/scope")
    empty = await propagate("docs", [], reason="revoked")
    assert empty.ids == frozenset() and empty.entry_id is None
    assert calls == [] and await snapshot(store) == before


async def test_failing_handler_does_not_stop_others(store: SessionStore) -> None:
    seen: list[str] = []

    async def broken(tombstones: TombstoneSet) -> None:
        raise RuntimeError("boom")

    async def ok(tombstones: TombstoneSet) -> None:
        seen.append(tombstones.scope)

    propagate = create_deletion_propagator(store, [broken, ok])
    with pytest.raises(RuntimeError):
        await propagate("docs", ["e1"], reason="revoked")
    assert seen == ["docs"]
    assert await list_invalidated_ids(store, "docs") == {"e1"}


async def test_drop_handler_appends_one_drop_entry(store: SessionStore) -> None:
    builder, ids = story()
    await load_builder(store, builder)
    session = Session(store, "s1")
    before = await store.ledger("s1")
    handler = create_observational_memory_drop_handler(session=session, append_entry=session.append)
    propagate = create_deletion_propagator(store, [handler])
    leaf = await session.leaf()
    appended: list[SessionEntry | None] = []

    async def capture(tombstones: TombstoneSet) -> None:
        appended.append(await handler(tombstones))

    propagate.handlers = (capture,)
    await propagate("docs", [ids["m1"]], reason="revoked")
    entry = appended[0]
    assert entry is not None and entry.parent_id == leaf and await session.leaf() == entry.id
    assert entry.data == {"type": OBSERVATIONS_DROPPED, "observationIds": [ids["o1"]]}
    after = await store.ledger("s1")
    assert after.dropped_observation_ids == (ids["o1"],)
    # A tombstone drop is not dropper progress: no coverage moved.
    assert after.drop_coverage == before.drop_coverage
    assert after.observation_coverage == before.observation_coverage
    # m2 is a source of o1 (already dropped) and o3: only o3 is named now.
    await propagate("docs", [ids["m2"]], reason="revoked")
    assert appended[1] is not None and appended[1].data == {
        "type": OBSERVATIONS_DROPPED,
        "observationIds": [ids["o3"]],
    }
    # Nothing left to match, a corrected source, an unknown id: nothing appended.
    snap = await snapshot(store)
    await handler(TombstoneSet("docs", frozenset({ids["m1"], "zzz"}), "revoked"))
    await handler(TombstoneSet("docs", frozenset({ids["m3"]}), "corrected"))
    assert await snapshot(store) == snap


async def test_drop_handler_detects_misbound_append(store: SessionStore) -> None:
    builder, ids = story()
    await load_builder(store, builder)
    session = Session(store, "s1")

    async def elsewhere(entry: SessionEntry) -> None:
        return None  # appends nowhere: the entry never lands at the session's leaf

    handler = create_observational_memory_drop_handler(session=session, append_entry=elsewhere)
    with pytest.raises(BranchMismatchError):
        await handler(TombstoneSet("docs", frozenset({ids["m1"]}), "revoked"))


async def read_path_equals_drop_path(
    store: SessionStore, builder: BranchBuilder, scope: str, tombstoned: list[str]
) -> None:
    """Pre-drop + invalidated ids, post-drop + invalidated ids: the same memory."""
    sid = builder.session_id
    session = Session(store, sid)
    handler = create_observational_memory_drop_handler(session=session, append_entry=session.append)
    propagate = create_deletion_propagator(store, [handler])
    pre_entries = await session.entries()
    # Recorded before the drop ran: the read path alone must already withhold.
    await create_deletion_propagator(store, [])(scope, tombstoned, reason="revoked")
    blocked = await list_invalidated_ids(store, scope)
    assert set(tombstoned) <= blocked
    read_path = build_observational_memory_context_blocks(pre_entries, invalidated_ids=blocked)
    await propagate(scope, tombstoned, reason="revoked")
    post_entries = await session.entries()
    both_paths = build_observational_memory_context_blocks(post_entries, invalidated_ids=blocked)
    stored = await build_observational_memory_context_blocks(
        store, session_id=sid, invalidated_ids=blocked
    )
    assert memory_text(read_path) == memory_text(both_paths) == memory_text(stored)
    # The drop alone withholds every tombstoned observation too (reflections are judged
    # by invalidated ids only: a drop prunes the pool, it does not retract a conclusion).
    ledger = fold_observational_memory_ledger(post_entries)
    drop_only, _ = active_memory(ledger)
    with_ids, _ = active_memory(ledger, blocked)
    assert [r.id for r in drop_only] == [r.id for r in with_ids]


async def test_read_and_drop_paths_agree(store: SessionStore) -> None:
    builder, ids = story()
    await load_builder(store, builder)
    await read_path_equals_drop_path(store, builder, "docs", [ids["m1"]])
    text = memory_text(
        build_observational_memory_context_blocks(await Session(store, "s1").entries())
    )
    assert "Invoice 4471" not in text and "Deploy on friday" in text


@pytest.mark.parametrize("seed", [2, 5, 9, 13])
async def test_read_and_drop_paths_agree_on_generated(store: SessionStore, seed: int) -> None:
    builder = random_builder(seed, 60, forks=False)
    await load_builder(store, builder)
    rng = random.Random(seed)
    messages = [e.id for e in builder.path if e.kind == "message"]
    ledger = fold_observational_memory_ledger(builder.path)
    picks = rng.sample(messages, k=min(3, len(messages)))
    if ledger.observations:
        picks.append(rng.choice(ledger.observations).id)
    await read_path_equals_drop_path(store, builder, f"scope-{seed}", picks)
