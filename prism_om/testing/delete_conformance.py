"""``delete_session`` conformance: the erasure rules, the same on every adapter.

Mixed into ``StoreConformance``; the in-memory adapter is the reference: a store that
replays the same sessions and deletes the same one must read exactly like it, memory and
summaries included, across a reopen for persistent stores.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Literal

from ..errors import InvalidSessionIdError, SessionNotFoundError
from ..stores.base import SessionStore
from ..stores.memory import MemoryStore
from ._requires import pytest
from .generate import make_message
from .om_factories import random_builder

if TYPE_CHECKING:
    from .conformance import StoreOpener

__all__ = ["DeleteConformance"]


async def _fill(store: SessionStore) -> dict[str, int]:
    """Three sessions with forks and memory records; entry counts by session."""
    counts: dict[str, int] = {}
    for seed, sid in enumerate(("keep-a", "gone", "keep-b")):
        builder = random_builder(seed + 11, 50, session_id=sid)
        for entry in builder.entries:
            await store.append(entry)
        counts[sid] = len(builder.entries)
    return counts


async def _view(store: SessionStore) -> dict[str, object]:
    """What a reader sees of every session, memory and summaries included."""
    view: dict[str, object] = {"_sessions": await store.sessions()}
    for sid in await store.sessions():
        view[sid] = {
            "list": [e.to_wire() for e in await store.list(sid)],
            "leaf": await store.leaf(sid),
            "leaves": await store.leaves(sid),
            "ledger": await store.ledger(sid),
            "scopes": await store.scope_map(sid),
            "tokens": await store.branch_tokens(sid),
            "head": await store.memory_head(sid),
        }
    summaries = [
        (s.session_id, s.entries, s.messages, s.leaves) for s in await store.session_summaries()
    ]
    view["_summaries"] = summaries
    return view


class DeleteConformance:
    """``delete_session``: one session erased whole, the others untouched."""

    @pytest.fixture
    async def reference(self) -> AsyncIterator[MemoryStore]:
        store = MemoryStore()
        yield store
        await store.close()

    async def test_delete_session_matches_the_reference(
        self, store: SessionStore, reference: MemoryStore
    ) -> None:
        counts = await _fill(store)
        await _fill(reference)
        gone = await store.list("gone")
        assert await store.delete_session("gone") == counts["gone"]
        assert await reference.delete_session("gone") == counts["gone"]
        assert await _view(store) == await _view(reference)
        assert await store.sessions() == ["keep-a", "keep-b"]
        assert await store.list("gone") == [] and await store.leaf("gone") is None
        assert await store.leaves("gone") == [] and await store.entries("gone") == []
        assert await store.get_many(e.id for e in gone) == {}
        assert not (await store.ledger("gone")).observations

    async def test_a_deleted_session_can_be_written_again(self, store: SessionStore) -> None:
        await _fill(store)
        old = await store.list("gone")
        before = await store.ledger("gone", old[-1].id)
        assert before.observations  # the erased session had memory...
        await store.branch_tokens("gone", old[-1].id)
        await store.delete_session("gone")
        # ...and its ids come back as plain messages with other text: nothing of the erased
        # session (a remembered ledger, a token count) may answer for them.
        fresh, parent = [], None
        for n, entry in enumerate(old):
            role: Literal["user", "assistant"] = "user" if n % 2 == 0 else "assistant"
            fresh.append(make_message("gone", entry.id, parent, role, f"new text {n} " * 9, n))
            parent = entry.id
        await store.append_many(fresh)
        reference = MemoryStore()
        await reference.append_many(fresh)
        assert [e.to_wire() for e in await store.list("gone")] == [e.to_wire() for e in fresh]
        assert await store.ledger("gone") == await reference.ledger("gone")
        assert not (await store.ledger("gone")).observations
        assert await store.branch_tokens("gone") == await reference.branch_tokens("gone")
        assert await store.sessions() == ["keep-a", "keep-b", "gone"]

    async def test_delete_an_unknown_session_is_refused(self, store: SessionStore) -> None:
        await _fill(store)
        before = await _view(store)
        with pytest.raises(SessionNotFoundError, match="'nobody'") as caught:
            await store.delete_session("nobody")
        assert caught.value.session_id == "nobody" and caught.value.url == store.url
        with pytest.raises(InvalidSessionIdError):
            await store.delete_session("../keep-a")
        assert await _view(store) == before

    async def test_delete_survives_a_reopen(self, store_opener: StoreOpener) -> None:
        if not store_opener.persistent:
            pytest.skip("an in-memory store keeps nothing across opens")
        async with await store_opener.open() as store:
            await _fill(store)
            await store.delete_session("gone")
            expected = await _view(store)
        async with await store_opener.open() as store:
            assert await _view(store) == expected
            assert "gone" not in await store.sessions()
