"""Observational-memory conformance: every adapter's memory queries equal the pure fold.

For generated sessions (messages, observations, reflections, drops, tombstones,
compactions, scope records and forks), each adapter's ``ledger()``, ``scope_map()``,
``recent_messages()`` and ``entries_after()``, and the store-backed context blocks, must
equal the pure reference functions over ``entries()`` for every leaf; and every adapter
must refuse the same invalid memory records with ``MemoryRecordError``, writing nothing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

from ..core.branch_reads import entries_after_cursor, last_eligible_messages
from ..core.branch_snapshot import advance_snapshot, snapshot_from_branch
from ..core.ledger import fold_ledger
from ..core.ledger_views import live_ledger, restrict_ledger
from ..core.records import OBSERVATIONS_DROPPED, OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED
from ..core.scope_map import SCOPE_OPENED, fold_work_scope_map
from ..entries import SessionEntry, custom_entry, message_entry
from ..errors import MemoryRecordError, PrismMemoryError
from ..observational_memory import (
    build_observational_memory_context_blocks,
    recall_observational_memory,
    recall_observational_memory_branch_page,
    unscanned_entries,
)
from ..stores.base import SOURCES_READ_AHEAD, MarkedData, SessionStore
from ..tokens import get_estimator
from ._requires import pytest
from .conformance import StoreOpener, snapshot
from .om_factories import BranchBuilder, random_builder
from .search_conformance import SearchConformance
from .supersession_conformance import SupersessionConformance

__all__ = ["MemoryConformance", "load_builder"]


async def load_builder(store: SessionStore, builder: BranchBuilder, batch: int = 7) -> None:
    """Append a builder's entries in append order, in batches of ``batch``."""
    entries = builder.entries
    for start in range(0, len(entries), batch):
        await store.append_many(entries[start : start + batch])
    if builder.path:
        await store.checkout(builder.session_id, builder.path[-1].id)


def _marked_batch(sid: str) -> list[SessionEntry]:
    """A root and entries marked ``host.item`` whose message contents hold every shape
    a content can (text that looks like JSON, escapes, any Unicode, parts of every kind,
    none), tool calls, and one unmarked message: what ``marked_data`` must give back."""
    mark = {"type": "host.item"}
    texts = [
        "plain words",
        'a quote " a backslash \\ a newline \n a tab \t and \\u00e9 written out',
        "accents é, CJK 漢字, an emoji 🧭, a line separator \u2028 and \x7f",
        '{"looks": ["like", "json"], "n": 1}',
        '"quoted"',
        "",
    ]
    batch: list[SessionEntry] = [custom_entry(sid, {"type": "host.root"})]
    for n, text in enumerate(texts):
        batch.append(message_entry(sid, "user", text, data={**mark, "n": n}))
    parts = [
        {"type": "text", "text": texts[1]},
        {"type": "image", "url": "https://example.com/a.png", "mimeType": "image/png"},
        {"type": "thinking", "thinking": texts[2]},
        {"type": "text", "text": ""},
    ]
    batch += [
        message_entry(sid, "assistant", parts, data={**mark, "n": "parts"}),
        message_entry(sid, "assistant", [], data={**mark, "n": "no parts"}),
        message_entry(
            sid,
            "assistant",
            "",
            data={**mark, "n": "call"},
            tool_calls=[{"id": "call_1", "name": "look", "arguments": {"q": texts[3]}}],
        ),
        message_entry(sid, "tool", parts[:1], tool_call_id="call_1", data={**mark, "n": 9}),
        custom_entry(sid, {**mark, "n": "custom", "text": texts[2]}),
        message_entry(sid, "user", "unmarked"),
    ]
    return batch


class MemoryConformance(SupersessionConformance, SearchConformance):
    """Memory queries of the store under test against the pure functions (supersession
    of reflections included: see ``SupersessionConformance``; search against the
    in-memory store: see ``SearchConformance``)."""

    @pytest.fixture
    async def store(self, store_opener: StoreOpener) -> AsyncIterator[SessionStore]:
        opened = await store_opener.open()
        yield opened
        await opened.close()

    async def _check_leaf(self, store: SessionStore, sid: str, leaf: str) -> None:
        branch = await store.entries(sid, leaf)
        assert await store.ledger(sid, leaf) == fold_ledger(branch)
        assert await store.entry_count(sid, leaf) == len(branch)
        estimator = get_estimator()
        tokens = sum(estimator.count_entry(e) for e in branch if e.kind == "message")
        assert await store.branch_tokens(sid, leaf) == tokens
        ledger = fold_ledger(branch)
        some = {r.id for r in ledger.observations[::3]} | {r.id for r in ledger.reflections[::2]}
        some |= {"ffffffffffff", *ledger.dropped_observation_ids[:2]}
        assert await store.memory_subset(sid, some, leaf) == restrict_ledger(ledger, some)
        # What a minted id must avoid: any id of the branch, dropped or superseded too.
        ids = {r.id for r in ledger.observations} | {r.id for r in ledger.reflections}
        assert await store.taken_memory_ids(sid, some, leaf) == some & ids
        assert await store.live_ledger(sid, leaf) == live_ledger(ledger)
        if leaf == await store.leaf(sid):
            assert await store.memory_subset(sid, some) == restrict_ledger(ledger, some)
        picked = [e.id for e in branch[::7]] + ["no-such-entry"]
        assert await store.get_many(picked) == {e.id: e for e in branch[::7]}
        compactions = [e for e in branch if e.kind == "compaction"]
        assert await store.last_compaction(sid, leaf) == (compactions[-1] if compactions else None)
        for marker in {e.custom_type for e in branch if e.custom_type} | {"no-such-type"}:
            wanted = [
                MarkedData(e.data or {}, None if e.message is None else e.message.to_wire())
                for e in branch
                if e.custom_type == marker
            ]
            assert await store.marked_data(sid, marker, leaf) == wanted
            if wanted:
                # Fresh objects: what a caller does to them is not in the next read.
                changed = await store.marked_data(sid, marker, leaf)
                changed[0].data["type"] = "changed"
                if changed[0].message is not None:
                    changed[0].message["role"] = "changed"
                assert await store.marked_data(sid, marker, leaf) == wanted
        assert await store.scope_map(sid, leaf) == fold_work_scope_map(branch)
        for count in (0, 1, 8, 50):
            assert await store.recent_messages(sid, count, leaf) == last_eligible_messages(
                branch, count
            )
        for cursor in (None, branch[0].id, branch[len(branch) // 2].id, branch[-1].id):
            assert await store.entries_after(sid, cursor, leaf) == entries_after_cursor(
                branch, cursor
            )
        assert await unscanned_entries(store, session_id=sid, leaf_id=leaf) == unscanned_entries(
            branch
        )
        for recent in (0, 3, 8):
            for full in (False, True):
                assert await store.snapshot(
                    sid, recent=recent, leaf_id=leaf, full=full
                ) == snapshot_from_branch(branch, recent, full=full)
        if leaf == await store.leaf(sid):
            assert await store.snapshot(sid) == snapshot_from_branch(branch, 8)
        for keep in (0, 3, 8):
            from_store = await build_observational_memory_context_blocks(
                store, session_id=sid, leaf_id=leaf, keep_recent_entries=keep
            )
            assert from_store == build_observational_memory_context_blocks(
                branch, keep_recent_entries=keep
            )

    @pytest.mark.parametrize("seed", range(6))
    async def test_memory_queries_equal_the_pure_fold(self, store: SessionStore, seed: int) -> None:
        builder = random_builder(seed, steps=90, session_id=f"om{seed}")
        await load_builder(store, builder, batch=1 + seed % 5)
        sid = builder.session_id
        assert [e.id for e in await store.entries(sid)] == [e.id for e in builder.path]
        leaves = await store.leaves(sid)
        for leaf in [builder.path[-1].id, *leaves[:3]]:
            await self._check_leaf(store, sid, leaf)

    @pytest.mark.parametrize("seed", range(3))
    async def test_pages_equal_the_reference_on_every_branch(
        self, store: SessionStore, seed: int
    ) -> None:
        """The public page on the store equals the page over the branch's entries, both
        directions and details, from a cursor on every kind of entry (a message pages; any
        other entry, one off the branch or unknown fails the same way), on every leaf."""
        builder = random_builder(seed, steps=70, session_id=f"pg{seed}")
        await load_builder(store, builder)
        sid = builder.session_id
        everything = await store.list(sid)
        for leaf in [None, *(await store.leaves(sid))[:3]]:
            branch = await store.entries(sid, leaf)
            cursors = [e.id for e in branch[::3]] + [e.id for e in everything[::11]]
            cursors.append("no-such-entry")
            for cursor in dict.fromkeys(cursors):
                for direction in ("forward", "backward"):
                    for detail, limit in (("summary", 1), ("full", 3), ("summary", 20)):
                        options: dict[str, Any] = {
                            "limit": limit,
                            "direction": direction,
                            "detail": detail,
                        }
                        want = _outcome(
                            recall_observational_memory_branch_page, branch, cursor, **options
                        )
                        got = await _outcome_async(
                            recall_observational_memory_branch_page,
                            store,
                            cursor,
                            session_id=sid,
                            leaf_id=leaf,
                            **options,
                        )
                        assert got == want, (leaf, cursor, direction, detail, limit)
            message = next((e for e in branch if e.kind == "message"), None)
            if message is not None:
                entries, more = await store.page_messages(sid, message.id, 5, "forward", leaf)
                parts = await store.page_message_parts(sid, message.id, 5, "forward", leaf)
                assert parts == ([(e.id, e.timestamp, e.message) for e in entries], more)

    @pytest.mark.parametrize("seed", range(3))
    async def test_recall_equals_the_reference(self, store: SessionStore, seed: int) -> None:
        """Recall by id on the store equals recall over the branch's entries, for every
        observation and reflection (dropped and superseded ones included), and
        ``memory_with_sources`` holds what ``memory_subset`` and ``get_many`` give."""
        builder = random_builder(seed, steps=80, session_id=f"rc{seed}")
        await load_builder(store, builder)
        sid = builder.session_id
        branch = await store.entries(sid)
        ledger = fold_ledger(branch)
        ids = [r.id for r in ledger.observations] + [r.id for r in ledger.reflections]
        for memory_id in [*ids, "ffffffffffff"]:
            want = recall_observational_memory(branch, memory_id)
            got = await recall_observational_memory(store, memory_id, session_id=sid)
            assert got == want, memory_id
            subset, sources = await store.memory_with_sources(sid, memory_id)
            assert subset == await store.memory_subset(sid, [memory_id])
            cited = [s for r in subset.observations for s in r.observation.source_entry_ids]
            assert sources == await store.get_many(list(sources))
            assert (
                list(dict.fromkeys(cited))[:SOURCES_READ_AHEAD]
                == [i for i in dict.fromkeys(cited) if i in sources][:SOURCES_READ_AHEAD]
            )

    @pytest.mark.parametrize("seed", range(4))
    async def test_an_advanced_snapshot_equals_a_fresh_one(
        self, store: SessionStore, seed: int
    ) -> None:
        """``advance_snapshot`` by the entries appended at the leaf is the snapshot a read
        at the new leaf returns (what a turn relies on to skip the read)."""
        builder = random_builder(seed, steps=60, session_id=f"adv{seed}")
        await load_builder(store, builder)
        sid = builder.session_id
        for recent in (0, 4):
            before = await store.snapshot(sid, recent=recent)
            batch = [
                message_entry(sid, "user", f"more {recent}"),
                custom_entry(sid, {"type": "host.note", "n": recent}),
                message_entry(sid, "assistant", f"reply {recent}"),
                message_entry(sid, "tool", "42", tool_call_id=f"call-{recent}"),
            ]
            stored = await store.append_at_leaf(batch)
            advanced = advance_snapshot(before, stored)
            assert advanced is not None
            assert advanced == await store.snapshot(sid, recent=recent)
        # A memory record is beyond advancing: only a read can fold it.
        head = await store.snapshot(sid)
        record = custom_entry(
            sid, {"type": OBSERVATIONS_RECORDED, "observations": [], "coversUpToId": head.leaf_id}
        )
        assert advance_snapshot(head, await store.append_at_leaf([record])) is None

    async def test_marked_data_gives_each_marked_message_as_stored(
        self, store: SessionStore
    ) -> None:
        """A marked message comes back exactly as its wire form, whatever its content
        holds: text that looks like JSON, escapes, any Unicode, parts of every kind, none
        (SQL stores parse the stored columns without building an entry, so each shape of
        what a host such as PrismSession keeps is checked)."""
        sid = "marked-content"
        batch = _marked_batch(sid)
        stored = await store.append_at_leaf(batch)
        wanted = [
            MarkedData(e.data or {}, None if e.message is None else e.message.to_wire())
            for e in stored
            if e.custom_type == "host.item"
        ]
        assert len(wanted) == 11
        assert await store.marked_data(sid, "host.item") == wanted

    async def test_memory_survives_reopen(self, store_opener: StoreOpener) -> None:
        builder = random_builder(11, steps=80, session_id="om-reopen")
        async with await store_opener.open() as store:
            await load_builder(store, builder)
            expected = await store.ledger("om-reopen")
        if not store_opener.persistent:
            return
        async with await store_opener.open() as store:
            assert await store.ledger("om-reopen") == expected
            await self._check_leaf(store, "om-reopen", builder.path[-1].id)

    # -- the shared validation refuses the same records everywhere -------------------------

    async def _refused(self, store: SessionStore, entry: SessionEntry, needle: str) -> None:
        before = await snapshot(store)
        with pytest.raises(MemoryRecordError, match=needle):
            await store.append(entry)
        assert await snapshot(store) == before

    async def test_invalid_memory_records_are_refused(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="v1")
        b.message("user")
        b.message("assistant")
        b.custom({"type": SCOPE_OPENED, "id": "task:a"})
        first = b.observe(covers=True)
        await store.append_many(b.entries)
        sid, leaf = "v1", b.path[-1].id
        known = first.data["observations"][0]["id"] if first.data else ""
        message_id = b.path[0].id
        custom_id = b.path[2].id

        def record(data: dict[str, object]) -> SessionEntry:
            return custom_entry(sid, data, parent_id=leaf)

        def observation(obs_id: str, sources: list[str]) -> dict[str, object]:
            return {
                "id": obs_id,
                "text": "x",
                "sourceEntryIds": sources,
                "observedAt": "2026-01-05T09:00:00Z",
            }

        rec = OBSERVATIONS_RECORDED
        await self._refused(
            store, record({"type": rec, "observations": [observation("ABC", [message_id])]}), "ABC"
        )
        await self._refused(
            store,
            record({"type": rec, "observations": [observation("aaaaaaaaaaab", ["ghost"])]}),
            "ghost",
        )
        await self._refused(
            store,
            record({"type": rec, "observations": [observation("aaaaaaaaaaab", [custom_id])]}),
            custom_id,
        )
        await self._refused(
            store, record({"type": rec, "observations": [observation(known, [message_id])]}), known
        )
        await self._refused(
            store,
            record(
                {
                    "type": REFLECTIONS_RECORDED,
                    "reflections": [
                        {"id": "bbbbbbbbbbbb", "text": "r", "observationIds": ["cccccccccccc"]}
                    ],
                }
            ),
            "cccccccccccc",
        )
        await self._refused(
            store,
            record({"type": OBSERVATIONS_DROPPED, "observationIds": ["dddddddddddd"]}),
            "dddddddddddd",
        )
        await self._refused(
            store,
            record({"type": rec, "observations": [], "coversUpToId": "ghost-cover"}),
            "ghost-cover",
        )
        await self._refused(store, record({"type": "om.unknown.kind"}), "om.unknown.kind")
        # A source on another branch of the same session is refused too.
        await store.checkout(sid, message_id)
        side = b.message("user")
        side = side.model_copy(update={"parent_id": message_id})
        await store.append(side)
        off_branch = custom_entry(
            sid,
            {"type": rec, "observations": [observation("eeeeeeeeeeee", [b.path[1].id])]},
            parent_id=side.id,
        )
        await self._refused(store, off_branch, b.path[1].id)
        # And a valid record is accepted by the same store.
        good = custom_entry(
            sid,
            {"type": rec, "observations": [observation("eeeeeeeeeeee", [side.id])]},
            parent_id=side.id,
        )
        await store.append(good)
        ledger = await store.ledger(sid)
        assert [r.id for r in ledger.observations][-1] == "eeeeeeeeeeee"

    async def test_batch_with_an_invalid_record_writes_nothing(self, store: SessionStore) -> None:
        b = BranchBuilder(session_id="v2")
        b.message("user")
        b.observe(covers=True)
        good = list(b.entries)
        bad = custom_entry(
            "v2",
            {"type": OBSERVATIONS_DROPPED, "observationIds": ["ffffffffffff"]},
            parent_id=good[-1].id,
        )
        with pytest.raises(MemoryRecordError):
            await store.append_many([*good, bad])
        assert await store.sessions() == []
        await store.append_many(good)
        assert len((await store.ledger("v2")).observations) == len(fold_ledger(good).observations)


def _outcome(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What ``call(...)`` returned, or the type of error it raised."""
    try:
        return call(*args, **kwargs)
    except PrismMemoryError as exc:
        return type(exc).__name__


async def _outcome_async(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """What ``await call(...)`` returned, or the type of error the call or await raised."""
    try:
        return await call(*args, **kwargs)
    except PrismMemoryError as exc:
        return type(exc).__name__
