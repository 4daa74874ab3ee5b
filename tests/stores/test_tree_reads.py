"""Memory and JSONL answer pages, recent messages and recall from the branch index.

Two things are checked: the indexed answers equal the pure functions over ``entries()``
on forked branches (every leaf, both directions, cursors anywhere), and the per-turn
public paths never read the whole branch (``entries()`` is made to fail), so their cost
does not follow the transcript's length.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from prism_om.core.branch_reads import page_around_cursor
from prism_om.core.sources import is_eligible_observation_source_entry
from prism_om.entries import SessionEntry
from prism_om.errors import EntryNotFoundError, InvalidInputError, SessionMismatchError
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder

INDEXED = ["memory", "jsonl"]


@pytest.fixture(params=INDEXED)
async def store(
    request: pytest.FixtureRequest, make_opener: Callable[[str], StoreOpener]
) -> AsyncIterator[SessionStore]:
    opened = await make_opener(request.param).open()
    yield opened
    await opened.close()


def _forbid_branch_reads(store: SessionStore, monkeypatch: pytest.MonkeyPatch) -> None:
    async def whole_branch(*args: object, **kwargs: object) -> list[SessionEntry]:
        raise AssertionError("a per-turn read asked for the whole branch")

    monkeypatch.setattr(store, "entries", whole_branch)
    monkeypatch.setattr(store, "list", whole_branch)


async def _expect_page(
    store: SessionStore,
    sid: str,
    branch: list[SessionEntry],
    cursor: str,
    limit: int,
    direction: str,
    leaf: str,
) -> None:
    try:
        expected: object = page_around_cursor(branch, cursor, limit, direction)  # type: ignore[arg-type]
    except (EntryNotFoundError, InvalidInputError) as exc:
        with pytest.raises(type(exc)) as raised:
            await store.page_messages(sid, cursor, limit, direction, leaf)  # type: ignore[arg-type]
        assert str(raised.value) == str(exc)
        assert (raised.value.entry_id, raised.value.session_id) == (cursor, sid)
        assert raised.value.url == store.url
        return
    assert await store.page_messages(sid, cursor, limit, direction, leaf) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", range(4))
async def test_pages_equal_the_pure_page_on_every_leaf(store: SessionStore, seed: int) -> None:
    builder = random_builder(seed, steps=120, session_id=f"pg{seed}")
    await load_builder(store, builder, batch=1 + seed % 4)
    sid = builder.session_id
    every = builder.entries
    for leaf in [*(await store.leaves(sid))[:4], builder.path[-1].id]:
        branch = await store.entries(sid, leaf)
        messages = [e.id for e in branch if is_eligible_observation_source_entry(e)]
        # Cursors: messages anywhere on the branch, a non-message, entries off the branch.
        cursors = [*messages[:: max(len(messages) // 6, 1)], messages[-1]] if messages else []
        cursors += [e.id for e in branch if e.kind != "message"][:2]
        cursors += [*[e.id for e in every if e not in branch][:2], "no-such-entry"]
        for cursor in cursors:
            for limit in (1, 3, 20):
                for direction in ("forward", "backward"):
                    await _expect_page(store, sid, branch, cursor, limit, direction, leaf)


async def test_page_errors_match_the_pure_page_for_odd_leaves(store: SessionStore) -> None:
    b = BranchBuilder(session_id="odd")
    b.message("user")
    b.message("assistant")
    await store.append_many(b.entries)
    other = BranchBuilder(session_id="other")
    other.message("user")
    await store.append_many(other.entries)
    cursor = b.path[0].id
    with pytest.raises(EntryNotFoundError):
        await store.page_messages("nobody", cursor, 5)
    with pytest.raises(SessionMismatchError):
        await store.page_messages("odd", cursor, 5, "forward", other.path[0].id)
    with pytest.raises(EntryNotFoundError):
        await store.page_messages("odd", cursor, 5, "forward", "missing-leaf")
    # The cursor's own session decides: an entry of another session is off this branch.
    with pytest.raises(EntryNotFoundError, match="not an entry of the current branch"):
        await store.page_messages("odd", other.path[0].id, 5)


async def test_per_turn_reads_never_read_the_whole_branch(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = random_builder(3, steps=150, session_id="turn")
    await load_builder(store, builder)
    sid = builder.session_id
    branch = list(builder.path)
    cursor = next(e.id for e in branch[len(branch) // 2 :] if e.kind == "message")
    ledger = await store.ledger(sid)
    memory_id = ledger.observations[len(ledger.observations) // 2].id
    expected_page = await recall_observational_memory_branch_page(
        store, cursor, session_id=sid, limit=5
    )
    expected_recall = await recall_observational_memory(store, memory_id, session_id=sid)
    expected_recent = await store.recent_messages(sid, 8)
    assert expected_recall.found and expected_page.messages

    _forbid_branch_reads(store, monkeypatch)
    page = await recall_observational_memory_branch_page(store, cursor, session_id=sid, limit=5)
    assert page == expected_page
    back = await recall_observational_memory_branch_page(
        store, cursor, session_id=sid, limit=5, direction="backward"
    )
    assert back.messages
    assert await recall_observational_memory(store, memory_id, session_id=sid) == expected_recall
    assert await store.recent_messages(sid, 8) == expected_recent
    assert await store.entry_count(sid) == len(branch)
    assert await store.page_messages(sid, cursor, 3) == page_around_cursor(
        branch, cursor, 3, "forward"
    )


async def test_recall_of_a_dropped_observation_keeps_its_drop(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = BranchBuilder(session_id="dr")
    b.message("user")
    b.message("assistant")
    recorded = b.observe(1, covers=True)
    b.message("user")
    assert recorded.data is not None
    memory_id = recorded.data["observations"][0]["id"]
    b.drop([memory_id])
    await store.append_many(b.entries)
    full = await store.ledger("dr")
    assert memory_id in full.dropped_observation_ids

    _forbid_branch_reads(store, monkeypatch)
    subset = await store.memory_subset("dr", [memory_id])
    assert subset.dropped_observation_ids == (memory_id,)
    assert [r.id for r in subset.observations] == [memory_id]
    recall = await recall_observational_memory(store, memory_id, session_id="dr")
    assert recall.found and recall.dropped
    # Before the drop, on the same branch: recorded, not dropped.
    before = await store.memory_subset("dr", [memory_id], b.path[3].id)
    assert before.dropped_observation_ids == ()
