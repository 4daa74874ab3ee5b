"""The store conformance suite: every rule of ``SessionStore``, importable by any adapter.

Subclass ``StoreConformance`` in a test module and define a ``store_opener`` fixture that
returns a ``StoreOpener``: an async ``open()`` that opens the store under test (again and
again on the same underlying data when ``persistent`` is true). The in-memory adapter is
the reference every behaviour is compared with.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

from ..core.timestamps import utc_timestamp
from ..entries import SessionEntry
from ..errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    InvalidSessionIdError,
    RootExistsError,
    SessionMismatchError,
    StoreClosedError,
    UnknownParentError,
)
from ..stores._summary import latest_timestamp, summarize_entries
from ..stores.base import SessionStore, SessionSummary
from ..stores.memory import MemoryStore
from ._requires import pytest
from .conformance_bounds import BoundsConformance
from .conformance_inputs import InputsConformance
from .delete_conformance import DeleteConformance
from .generate import LeafOp, Op, generate_ops, make_message
from .tombstone_conformance import TombstoneConformance
from .write_conformance import WriteConformance

__all__ = ["StoreConformance", "StoreOpener", "apply_ops", "snapshot"]


@dataclass(frozen=True)
class StoreOpener:
    """Opens the store under test; ``persistent`` stores keep their data across opens."""

    open: Callable[[], Awaitable[SessionStore]]
    persistent: bool


async def apply_ops(store: SessionStore, ops: Sequence[Op]) -> None:
    """Replay generated operations on a store."""
    for op in ops:
        if isinstance(op, LeafOp):
            await store.checkout(op.session_id, op.entry_id)
        elif op.single:
            for entry in op.entries:
                await store.append(entry)
        else:
            await store.append_many(op.entries)


async def snapshot(store: SessionStore) -> dict[str, object]:
    """Everything a reader can observe of a store, as plain data, for comparisons."""
    view: dict[str, object] = {}
    for sid in await store.sessions():
        listed = await store.list(sid)
        leaves = await store.leaves(sid)
        view[sid] = {
            "list": [e.to_wire() for e in listed],
            "leaf": await store.leaf(sid),
            "leaves": leaves,
            "branch": [e.id for e in await store.entries(sid)],
            "branches": {leaf: [e.id for e in await store.entries(sid, leaf)] for leaf in leaves},
        }
    view["_sessions"] = await store.sessions()
    return view


def _msg(sid: str, eid: str, parent: str | None, text: str = "hello") -> SessionEntry:
    return make_message(sid, eid, parent, "user", text, 1)


class StoreConformance(
    WriteConformance, BoundsConformance, DeleteConformance, TombstoneConformance, InputsConformance
):
    """The shared suite. Every test opens a fresh store through ``store_opener``.

    ``WriteConformance`` adds the write path's concurrency and cancellation rules; the
    hard-bound tests (entry size, record caps) come from ``BoundsConformance``;
    ``delete_session`` from ``DeleteConformance``; the tombstone append rule from
    ``TombstoneConformance``; bad arguments and unstorable entries from
    ``InputsConformance``.
    """

    @pytest.fixture
    async def store(self, store_opener: StoreOpener) -> AsyncIterator[SessionStore]:
        opened = await store_opener.open()
        yield opened
        await opened.close()

    # -- round trips and order -----------------------------------------------------------

    async def test_append_get_round_trip(self, store: SessionStore) -> None:
        entry = _msg("s1", "a", None, "héllo 👋")
        await store.append(entry)
        got = await store.get("a")
        assert got is not None and got.to_wire() == entry.to_wire()
        assert await store.get("missing") is None

    async def test_list_branch_leaves_leaf(self, store: SessionStore) -> None:
        await store.append_many([_msg("s1", "a", None), _msg("s1", "b", "a"), _msg("s1", "c", "b")])
        assert await store.leaf("s1") == "c"
        await store.checkout("s1", "a")
        await store.append(_msg("s1", "d", "a"))
        assert await store.leaf("s1") == "d"
        assert [e.id for e in await store.list("s1")] == ["a", "b", "c", "d"]
        assert [e.id for e in await store.entries("s1")] == ["a", "d"]
        assert [e.id for e in await store.entries("s1", "c")] == ["a", "b", "c"]
        assert await store.leaves("s1") == ["c", "d"]
        assert await store.sessions() == ["s1"]
        assert await store.is_on_branch("s1", "a")
        assert not await store.is_on_branch("s1", "b")
        assert await store.is_on_branch("s1", "b", "c")

    async def test_unknown_session_reads_empty(self, store: SessionStore) -> None:
        assert await store.list("nobody") == []
        assert await store.entries("nobody") == []
        assert await store.leaves("nobody") == []
        assert await store.leaf("nobody") is None
        assert await store.sessions() == []

    async def test_sessions_in_creation_order(self, store: SessionStore) -> None:
        for sid in ("zeta", "alpha", "mid"):
            await store.append(_msg(sid, f"{sid}-root", None))
        assert await store.sessions() == ["zeta", "alpha", "mid"]

    # -- rules, each with its exact error, and nothing written -----------------------------

    async def _unchanged(self, store: SessionStore, before: dict[str, object]) -> None:
        assert await snapshot(store) == before

    async def test_duplicate_id_across_store(self, store: SessionStore) -> None:
        await store.append(_msg("s1", "a", None))
        before = await snapshot(store)
        with pytest.raises(DuplicateEntryError, match="'a'"):
            await store.append(_msg("s2", "a", None))
        with pytest.raises(DuplicateEntryError):
            await store.append_many([_msg("s1", "b", "a"), _msg("s1", "b", "a")])
        await self._unchanged(store, before)

    async def test_unknown_parent(self, store: SessionStore) -> None:
        await store.append(_msg("s1", "a", None))
        before = await snapshot(store)
        with pytest.raises(UnknownParentError, match="'ghost'"):
            await store.append(_msg("s1", "b", "ghost"))
        await self._unchanged(store, before)

    async def test_parent_in_other_session(self, store: SessionStore) -> None:
        await store.append(_msg("s1", "a", None))
        await store.append(_msg("s2", "x", None))
        before = await snapshot(store)
        with pytest.raises(SessionMismatchError):
            await store.append(_msg("s2", "y", "a"))
        await self._unchanged(store, before)

    async def test_one_root_per_session(self, store: SessionStore) -> None:
        await store.append(_msg("s1", "a", None))
        before = await snapshot(store)
        with pytest.raises(RootExistsError):
            await store.append(_msg("s1", "b", None))
        with pytest.raises(RootExistsError):
            await store.append_many([_msg("s9", "r1", None), _msg("s9", "r2", None)])
        await self._unchanged(store, before)

    async def test_batch_is_one_session(self, store: SessionStore) -> None:
        with pytest.raises(SessionMismatchError):
            await store.append_many([_msg("s1", "a", None), _msg("s2", "b", None)])
        assert await store.sessions() == []

    async def test_rejected_batch_writes_nothing(self, store: SessionStore) -> None:
        await store.append(_msg("s1", "a", None))
        before = await snapshot(store)
        bad = [_msg("s1", "b", "a"), _msg("s1", "c", "b"), _msg("s1", "d", "nowhere")]
        with pytest.raises(UnknownParentError):
            await store.append_many(bad)
        await self._unchanged(store, before)
        assert await store.get("b") is None
        await store.append_many(bad[:2])
        assert [e.id for e in await store.entries("s1")] == ["a", "b", "c"]

    async def test_empty_batch_is_a_no_op(self, store: SessionStore) -> None:
        await store.append_many([])
        assert await store.sessions() == []

    # -- lone surrogates (issue 13 item 13): refused alike on every adapter ---------------

    async def test_lone_surrogates_are_refused_and_nothing_is_written(
        self, store: SessionStore
    ) -> None:
        from ..entries import entry_from_wire
        from ..errors import InvalidEntryError

        await store.append(_msg("s1", "a", None))
        before = await snapshot(store)
        wire = _msg("s1", "b", "a").to_wire()
        wire["message"]["content"] = "half a pair \ud83d"
        with pytest.raises(InvalidEntryError, match=r"'b'.*message\.content.*surrogate"):
            entry_from_wire(wire)
        # Copies skip validation; the store itself still refuses them.
        copied = _msg("s1", "b", "a").model_copy(
            update={
                "message": _msg("s1", "x", None).message.model_copy(  # type: ignore[union-attr]
                    update={"content": "\udc00 tail"}
                )
            }
        )
        with pytest.raises(InvalidEntryError, match=r"'b'.*surrogate"):
            await store.append(copied)
        with pytest.raises(InvalidEntryError, match=r"'b'.*surrogate"):
            await store.append_many([_msg("s1", "c", "a"), copied])
        await self._unchanged(store, before)
        assert await store.get("c") is None

    async def test_checkout_rules(self, store: SessionStore) -> None:
        await store.append(_msg("s1", "a", None))
        await store.append(_msg("s2", "x", None))
        with pytest.raises(EntryNotFoundError):
            await store.checkout("s1", "ghost")
        with pytest.raises(SessionMismatchError):
            await store.checkout("s1", "x")
        with pytest.raises(EntryNotFoundError):
            await store.entries("s1", "ghost")
        with pytest.raises(SessionMismatchError):
            await store.entries("s1", "x")
        assert await store.leaf("s1") == "a"

    async def test_invalid_session_ids_are_refused(self, store: SessionStore) -> None:
        for bad in ("../x", "a/b", "..", "", ".hidden", "x" * 129):
            with pytest.raises(InvalidSessionIdError):
                await store.list(bad)
            with pytest.raises(InvalidSessionIdError):
                await store.leaf(bad)
        assert await store.sessions() == []

    async def test_fork_by_appending_to_a_parent_with_a_child(self, store: SessionStore) -> None:
        await store.append_many([_msg("s1", "a", None), _msg("s1", "b", "a")])
        # The caller names the parent: a second writer on "a" forks instead of losing "b".
        await store.append(_msg("s1", "c", "a"))
        assert await store.leaves("s1") == ["b", "c"]
        assert [e.id for e in await store.entries("s1", "b")] == ["a", "b"]
        assert [e.id for e in await store.entries("s1")] == ["a", "c"]

    async def test_close_is_idempotent_and_final(self, store_opener: StoreOpener) -> None:
        store = await store_opener.open()
        await store.append(_msg("s1", "a", None))
        await store.close()
        await store.close()
        with pytest.raises(StoreClosedError):
            await store.get("a")
        with pytest.raises(StoreClosedError):
            await store.append(_msg("s1", "b", "a"))

    async def test_async_with_closes(self, store_opener: StoreOpener) -> None:
        async with await store_opener.open() as store:
            await store.append(_msg("s1", "a", None))
        with pytest.raises(StoreClosedError):
            await store.list("s1")

    # -- generated sessions against the reference ------------------------------------------

    @pytest.mark.parametrize("seed", [1, 2, 3])
    async def test_generated_sessions_match_reference(
        self, store_opener: StoreOpener, seed: int
    ) -> None:
        ops = generate_ops(seed, sessions=3, entries_per_session=80, forks=6)
        reference = MemoryStore()
        await apply_ops(reference, ops)
        expected = await snapshot(reference)
        store = await store_opener.open()
        try:
            await apply_ops(store, ops)
            assert await snapshot(store) == expected
            await self._check_membership(store, reference)
        finally:
            await store.close()
        if store_opener.persistent:
            async with await store_opener.open() as reopened:
                assert await snapshot(reopened) == expected
                await self._check_membership(reopened, reference)

    async def _check_membership(self, store: SessionStore, reference: MemoryStore) -> None:
        for sid in await reference.sessions():
            ids = [e.id for e in await reference.list(sid)]
            for leaf in (await reference.leaves(sid))[:4]:
                for eid in ids[::5]:
                    want = await reference.is_on_branch(sid, eid, leaf)
                    assert await store.is_on_branch(sid, eid, leaf) == want, (sid, eid, leaf)

    async def test_leaf_survives_reopen(self, store_opener: StoreOpener) -> None:
        if not store_opener.persistent:
            pytest.skip("an in-memory store keeps nothing across opens")
        async with await store_opener.open() as store:
            await store.append_many([_msg("s1", "a", None), _msg("s1", "b", "a")])
            await store.checkout("s1", "a")
        async with await store_opener.open() as store:
            assert await store.leaf("s1") == "a"
            await store.append(_msg("s1", "c", "a"))
        async with await store_opener.open() as store:
            assert await store.leaf("s1") == "c"
            assert await store.leaves("s1") == ["b", "c"]
            before = await snapshot(store)
            with pytest.raises(DuplicateEntryError):
                await store.append(_msg("s1", "c", "a"))
            assert await snapshot(store) == before

    async def test_many_tasks_share_one_store(self, store: SessionStore) -> None:
        import asyncio

        async def writer(n: int) -> None:
            sid = f"task{n}"
            batch = [_msg(sid, f"{sid}-0", None)]
            batch += [_msg(sid, f"{sid}-{i}", f"{sid}-{i - 1}") for i in range(1, 10)]
            if n == 7:
                batch[5] = _msg(sid, f"{sid}-5", "missing-parent")
            await store.append_many(batch)

        results = await asyncio.gather(*(writer(n) for n in range(50)), return_exceptions=True)
        failed = [n for n, r in enumerate(results) if isinstance(r, BaseException)]
        assert failed == [7]
        assert isinstance(results[7], UnknownParentError)
        assert await store.list("task7") == []
        for n in range(50):
            if n != 7:
                assert len(await store.list(f"task{n}")) == 10

    # -- per-session summaries (issue 13 item 17), on adapters that keep them ------------

    @staticmethod
    async def _summaries_or_skip(store: SessionStore) -> list[SessionSummary]:
        return await store.session_summaries()

    @staticmethod
    async def _summaries_from_entries(store: SessionStore) -> list[SessionSummary]:
        return [
            summarize_entries(sid, await store.list(sid), len(await store.leaves(sid)))
            for sid in await store.sessions()
        ]

    async def test_session_summaries_follow_the_entries(self, store_opener: StoreOpener) -> None:
        ops = generate_ops(7, sessions=3, entries_per_session=40, forks=5)
        async with await store_opener.open() as store:
            await self._summaries_or_skip(store)
            await apply_ops(store, ops[: len(ops) // 2])
            with pytest.raises(UnknownParentError):
                await store.append_many([_msg("fresh", "bad-root", None), _msg("fresh", "x", "?")])
            if not store_opener.persistent:
                # Nothing survives a reopen: the second half goes to the same store.
                await apply_ops(store, ops[len(ops) // 2 :])
                await self._check_summaries(store)
                return
        async with await store_opener.open() as store:
            await apply_ops(store, ops[len(ops) // 2 :])
            await self._check_summaries(store)

    async def _check_summaries(self, store: SessionStore) -> None:
        got = [
            replace(s, last_activity=utc_timestamp(s.last_activity))
            for s in await self._summaries_or_skip(store)
        ]
        assert got == await self._summaries_from_entries(store)
        assert sum(s.leaves for s in got) > len(got)  # the forks are counted

    async def test_session_summaries_compare_times_not_strings(self, store: SessionStore) -> None:
        await self._summaries_or_skip(store)
        stamps = ["2026-03-22T09:30:00.000Z", "20260318 101010", "2026-03-22T11:00:00+02:00"]
        parent = None
        for n, stamp in enumerate(stamps):
            entry = _msg("times", f"t{n}", parent).model_copy(update={"timestamp": stamp})
            await store.append(entry)
            parent = entry.id
        (summary,) = await self._summaries_or_skip(store)
        assert utc_timestamp(summary.last_activity) == "2026-03-22T09:30:00.000Z"

    async def test_session_summaries_match_the_entries(self, store: SessionStore) -> None:
        summaries = store.session_summaries
        assert await summaries() == []
        await store.append_many([_msg("s1", "a", None), _msg("s1", "b", "a"), _msg("s1", "c", "b")])
        await store.checkout("s1", "a")
        await store.append(_msg("s1", "d", "a"))
        await store.append_many([_msg("s1", "e", "b"), _msg("s1", "f", "e")])
        await store.append(_msg("s0", "z", None))
        got = await summaries()
        assert [s.session_id for s in got] == ["s1", "s0"]
        for summary in got:
            listed = await store.list(summary.session_id)
            assert summary.entries == len(listed)
            assert summary.messages == sum(1 for e in listed if e.kind == "message")
            assert summary.leaves == len(await store.leaves(summary.session_id))
            # Stores keep the time in one UTC form, whatever form the entries carry.
            assert utc_timestamp(summary.last_activity) == latest_timestamp(
                e.timestamp for e in listed
            )
        assert got[0].leaves == 3  # c, d, f
