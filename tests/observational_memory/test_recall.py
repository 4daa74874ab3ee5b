"""Exact-id recall and branch paging, on a list of entries and on every store adapter."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from prism_om.core.ledger_views import restrict_ledger
from prism_om.core.records import REFLECTIONS_RECORDED
from prism_om.entries import SessionEntry
from prism_om.errors import (
    EntryNotFoundError,
    InvalidIdError,
    InvalidInputError,
    PageTooLargeError,
    PrismMemoryError,
)
from prism_om.observational_memory import (
    fold_observational_memory_ledger,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.observational_memory.page import SUMMARY_CHARS, BranchPage
from prism_om.observational_memory.recall import MemoryRecall
from prism_om.stores.base import SessionStore
from prism_om.testing.conformance import snapshot
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder

SECRET = "sk-live-0123456789"
LONG = "word " * 80 + SECRET


def observation_ids(entry: SessionEntry) -> list[str]:
    assert entry.data is not None
    return [o["id"] for o in entry.data["observations"]]


class Story:
    """A small hand-built session: observations, a reflection, a drop and a fork."""

    def __init__(self) -> None:
        b = self.builder = BranchBuilder(session_id="s1", rng=random.Random(7))
        self.m1 = b.message("user", f"Deploy billing with key {SECRET} on friday")
        self.m2 = b.message("assistant", "Deploy is scheduled for friday.")
        self.m3 = b.message("tool", LONG)
        rec = b.observe(2, sources=[self.m1.id, self.m2.id], text=f"User deploys ({SECRET})")
        self.o1, self.o2 = observation_ids(rec)
        rec3 = b.observe(1, sources=[self.m3.id], text="Tool printed a long listing")
        (self.o3,) = observation_ids(rec3)
        self.r1 = b.memory_id()
        b.custom(
            {
                "type": REFLECTIONS_RECORDED,
                "reflections": [
                    {
                        "id": self.r1,
                        "text": "Billing deploy friday",
                        "observationIds": [self.o1, self.o3],
                    }
                ],
            }
        )
        b.drop([self.o3], covers=True)
        self.fork_point = b.message("user", "later")
        # A fork: an observation recorded on another branch only.
        other = b.observe(1, sources=[self.fork_point.id])
        (self.foreign,) = observation_ids(other)
        b.checkout(self.fork_point.id)
        self.m5 = b.message("assistant", "sure")
        self.path = list(b.path)


@pytest.fixture
def story() -> Story:
    return Story()


async def both(
    store: SessionStore, builder: BranchBuilder, memory_id: str, **kwargs: Any
) -> MemoryRecall:
    """Recall on the list and on the store; assert they agree; return the result."""
    listed = recall_observational_memory(builder.path, memory_id, **kwargs)
    stored = await recall_observational_memory(
        store, memory_id, session_id=builder.session_id, **kwargs
    )
    assert stored == listed
    assert stored.to_json() == listed.to_json()
    json.dumps(stored.to_json())
    return stored


# -- exact-id recall ---------------------------------------------------------------------


async def test_observation_with_exact_sources(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    result = await both(store, story.builder, story.o1)
    out = result.to_json()
    assert out["found"] is True and out["kind"] == "observation"
    assert out["text"].startswith("User deploys")
    assert out["observation"]["sourceEntryIds"] == [story.m1.id, story.m2.id]
    assert out["sources"] == [story.m1.to_wire(), story.m2.to_wire()]
    assert out["missingSourceEntryIds"] == []
    assert out["dropped"] is False


async def test_dropped_observation_stays_recallable(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    out = (await both(store, story.builder, story.o3)).to_json()
    assert out["found"] is True and out["dropped"] is True
    assert [s["id"] for s in out["sources"]] == [story.m3.id]


async def test_reflection_resolves_supports_from_full_ledger(
    store: SessionStore, story: Story
) -> None:
    await load_builder(store, story.builder)
    out = (await both(store, story.builder, story.r1)).to_json()
    assert out["kind"] == "reflection" and out["found"] is True
    assert [o["id"] for o in out["supportingObservations"]] == [story.o1, story.o3]
    assert [o["dropped"] for o in out["supportingObservations"]] == [False, True]
    assert out["droppedSupportingObservationIds"] == [story.o3]
    assert out["missingSupportingObservationIds"] == []
    # The dropped support still contributes its raw source.
    assert [s["id"] for s in out["sources"]] == [story.m1.id, story.m2.id, story.m3.id]


async def test_unknown_and_other_branch_ids(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    for memory_id in ("aaaaaaaaaaaa", story.foreign):
        out = (await both(store, story.builder, memory_id)).to_json()
        assert out == {"id": memory_id, "kind": None, "found": False, "reason": "unknown"}


@pytest.mark.parametrize(
    "bad", ["", "AAAAAAAAAAAA", "aaaa", "aaaaaaaaaaaaa", "zzzzzzzzzzzz", 12, None]
)
async def test_malformed_id_raises_before_any_read(store: SessionStore, bad: Any) -> None:
    with pytest.raises(InvalidIdError):
        recall_observational_memory([], bad)
    # Raised synchronously: no awaitable, so the store is never touched.
    with pytest.raises(InvalidIdError):
        recall_observational_memory(store, bad, session_id="s1")


async def test_invalidated_ids_withhold_without_text(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    cases = [
        (story.o1, {story.o1}),  # its own id
        (story.o1, {story.m2.id}),  # one of its sources
        (story.r1, {story.r1}),  # a reflection's own id
        (story.r1, {story.m3.id}),  # a source of a (dropped) support
        (story.r1, {story.o1}),  # a support
    ]
    for memory_id, invalid in cases:
        out = (await both(store, story.builder, memory_id, invalidated_ids=invalid)).to_json()
        kind = "reflection" if memory_id == story.r1 else "observation"
        assert out == {"id": memory_id, "kind": kind, "found": False, "reason": "revoked"}
    # An unrelated tombstone withholds nothing.
    out = (await both(store, story.builder, story.o2, invalidated_ids={story.m3.id})).to_json()
    assert out["found"] is True


async def test_secrets_redacted_everywhere(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    for memory_id in (story.o1, story.r1):
        out = (await both(store, story.builder, memory_id, secrets=[SECRET])).to_json()
        text = json.dumps(out)
        assert SECRET not in text and "[REDACTED]" in text


async def test_extra_ledgers_resolve_foreign_ids(store: SessionStore, story: Story) -> None:
    other = random_builder(9, 40, session_id="s2", forks=False)
    ledger = fold_observational_memory_ledger(other.path)
    if not ledger.observations:
        pytest.skip("seed produced no observation")
    foreign = ledger.observations[0]
    await load_builder(store, story.builder)
    await load_builder(store, other)
    listed = recall_observational_memory(story.path, foreign.id, extra_ledgers=[ledger])
    assert listed.found and listed.kind == "observation"
    # The list path only knows the entries it was given; the store path reads by id.
    assert listed.missing_source_entry_ids == tuple(foreign.observation.source_entry_ids)
    stored = await recall_observational_memory(
        store, foreign.id, session_id="s1", extra_ledgers=[ledger]
    )
    assert [s["id"] for s in stored.to_json()["sources"]] == foreign.observation.source_entry_ids


async def test_store_path_never_loads_the_branch(story: Story) -> None:
    from prism_om.stores.memory import MemoryStore

    class NoBranch(MemoryStore):
        async def entries(self, session_id: str, leaf_id: str | None = None) -> list[SessionEntry]:
            raise AssertionError("recall must not load the branch")

        async def ledger(self, session_id: str, leaf_id: str | None = None) -> Any:
            raise AssertionError("recall reads only the rows of the ids it resolves")

        async def memory_subset(self, session_id: str, ids: Any, leaf_id: Any = None) -> Any:
            whole = fold_observational_memory_ledger(await MemoryStore.entries(self, session_id))
            return restrict_ledger(whole, set(ids))

    store = NoBranch()
    await load_builder(store, story.builder)
    result = await recall_observational_memory(store, story.r1, session_id="s1")
    assert result.found


@pytest.mark.parametrize("seed", range(6))
async def test_store_and_list_agree_on_generated_sessions(store: SessionStore, seed: int) -> None:
    builder = random_builder(seed, 50, secrets=[SECRET])
    await load_builder(store, builder)
    ledger = fold_observational_memory_ledger(builder.path)
    ids = [r.id for r in ledger.observations] + [r.id for r in ledger.reflections]
    rng = random.Random(seed)
    messages = [e.id for e in builder.path if e.kind == "message"]
    invalid = set(rng.sample(messages, k=min(2, len(messages))))
    for memory_id in [*ids, "0123456789ab"]:
        await both(store, builder, memory_id, secrets=[SECRET])
        await both(store, builder, memory_id, invalidated_ids=invalid)


# -- branch pages ------------------------------------------------------------------------


async def page_both(
    store: SessionStore, builder: BranchBuilder, cursor: str, **kwargs: Any
) -> BranchPage:
    listed = recall_observational_memory_branch_page(builder.path, cursor, **kwargs)
    stored = await recall_observational_memory_branch_page(
        store, cursor, session_id=builder.session_id, **kwargs
    )
    assert stored == listed
    json.dumps(stored.to_json())
    return stored


async def test_page_summary_and_full(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    page = await page_both(store, story.builder, story.m1.id, secrets=[SECRET])
    assert [m["id"] for m in page.messages] == [
        story.m2.id,
        story.m3.id,
        story.fork_point.id,
        story.m5.id,
    ]
    assert page.next_cursor is None and page.to_json()["hasMore"] is False
    tool = page.messages[1]
    assert set(tool) == {"id", "role", "timestamp", "text", "truncated"}
    assert len(tool["text"]) == SUMMARY_CHARS and tool["truncated"] is True
    full = await page_both(store, story.builder, story.m1.id, detail="full", limit=2)
    assert full.messages[1]["message"]["content"] == LONG
    assert full.next_cursor == story.m3.id
    back = await page_both(
        store, story.builder, story.m5.id, direction="backward", secrets=[SECRET]
    )
    assert [m["id"] for m in back.messages] == [
        story.m1.id,
        story.m2.id,
        story.m3.id,
        story.fork_point.id,
    ]
    assert SECRET not in json.dumps(back.to_json())


async def test_page_fail_closed(store: SessionStore, story: Story) -> None:
    await load_builder(store, story.builder)
    custom = next(e for e in story.path if e.kind == "custom")
    off_branch = next(e for e in story.builder.entries if e not in story.path)
    for cursor, error in [
        ("nope", EntryNotFoundError),
        (off_branch.id, EntryNotFoundError),
        (custom.id, InvalidInputError),
    ]:
        with pytest.raises(error):
            recall_observational_memory_branch_page(story.path, cursor)
        with pytest.raises(error):
            await recall_observational_memory_branch_page(store, cursor, session_id="s1")
    before = await snapshot(store)
    bad_requests: list[tuple[dict[str, Any], type[PrismMemoryError]]] = [
        ({"limit": 101}, PageTooLargeError),
        ({"limit": 0}, InvalidInputError),
        ({"limit": True}, InvalidInputError),
        ({"direction": "up"}, InvalidInputError),
        ({"detail": "all"}, InvalidInputError),
    ]
    for kwargs, error in bad_requests:
        with pytest.raises(error):
            recall_observational_memory_branch_page(story.path, story.m1.id, **kwargs)
        with pytest.raises(error):
            recall_observational_memory_branch_page(store, story.m1.id, session_id="s1", **kwargs)
    bad_cursors: list[Any] = ["", "x" * 257, 5]
    for bad in bad_cursors:
        with pytest.raises(InvalidIdError):
            recall_observational_memory_branch_page(store, bad, session_id="s1")
    assert await snapshot(store) == before


@pytest.mark.parametrize("seed", range(4))
async def test_pages_walk_the_whole_branch(store: SessionStore, seed: int) -> None:
    builder = random_builder(seed, 60)
    await load_builder(store, builder)
    messages = [e.id for e in builder.path if e.kind == "message"]
    for direction, start in (("forward", messages[0]), ("backward", messages[-1])):
        seen: list[str] = []
        cursor: str | None = start
        while cursor is not None:
            page = await page_both(store, builder, cursor, limit=3, direction=direction)
            ids = [m["id"] for m in page.messages]
            seen = seen + ids if direction == "forward" else ids + seen
            cursor = page.next_cursor
        expected = messages[1:] if direction == "forward" else messages[:-1]
        assert seen == expected
