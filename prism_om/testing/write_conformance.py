"""Conformance of the write path under concurrency and cancellation.

Part of ``StoreConformance`` (it inherits this class), so every adapter runs it: the
cancellation rule of ``SessionStore``, ``append_at_leaf`` with and without the memory
head compare (in-process and across processes), and the checks of ``page_messages``.
Cross-process tests run only for stores that persist (``StoreOpener.persistent``), in
subprocesses that open the store by its ``url``.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..core.records import OBSERVATIONS_RECORDED
from ..entries import SessionEntry, custom_entry
from ..errors import (
    DuplicateEntryError,
    InvalidInputError,
    PageTooLargeError,
    SessionMismatchError,
    StaleCoverageError,
)
from ..ids import create_memory_id
from ..session import Session
from ..stores.base import SessionStore
from ._requires import pytest
from .generate import make_message

if TYPE_CHECKING:
    from .conformance import StoreOpener

__all__ = ["WriteConformance", "run_in_subprocess"]

# Appends ``count`` messages at the leaf of a session, through ``Session``.
_WRITER = """
import asyncio, sys
from prism_om.session import Session
from prism_om.stores import open_store

async def main(url, sid, count, tag):
    store = await open_store(url)
    try:
        session = Session(store, sid)
        for n in range(count):
            await session.append_message("user", f"{tag}-{n}")
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]))
"""
_SUBPROCESS_TIMEOUT_S = 120


async def run_in_subprocess(url: str, session_id: str, count: int, tag: str) -> None:
    """Append ``count`` messages at the session's leaf from another process."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _WRITER,
        url,
        session_id,
        str(count),
        tag,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), _SUBPROCESS_TIMEOUT_S)
    assert process.returncode == 0, err.decode(errors="replace")[-2000:]


def _msg(sid: str, eid: str, parent: str | None, text: str = "hello") -> SessionEntry:
    return make_message(sid, eid, parent, "user", text, 1)


def _chain(sid: str, prefix: str, size: int, parent: str | None) -> list[SessionEntry]:
    batch: list[SessionEntry] = []
    for n in range(size):
        batch.append(_msg(sid, f"{prefix}-{n}", parent, f"{prefix} {n}"))
        parent = batch[-1].id
    return batch


def _observation(sid: str, source: str, parent: str | None) -> SessionEntry:
    observation = {
        "id": create_memory_id(),
        "text": f"noted {source}",
        "sourceEntryIds": [source],
        "observedAt": _msg(sid, source, None).timestamp,
    }
    data = {
        "type": OBSERVATIONS_RECORDED,
        "observations": [observation],
        "coversUpToId": source,
    }
    return custom_entry(sid, data, parent_id=parent)


async def _present(store: SessionStore, batch: Sequence[SessionEntry]) -> int:
    """How many of the batch's entries the store holds."""
    return len(await store.get_many(e.id for e in batch))


class WriteConformance:
    """Concurrency, cancellation and argument rules of the write path."""

    # -- cancellation --------------------------------------------------------------------

    async def test_cancelled_writes_are_whole_or_absent_and_never_wedge(
        self, store_opener: StoreOpener
    ) -> None:
        rng = random.Random(13)
        store = await store_opener.open()
        try:
            await store.append(_msg("c", "root", None))
            acknowledged: list[list[SessionEntry]] = []
            cancelled: list[tuple[list[SessionEntry], int]] = []
            for n in range(200):
                batch = _chain("c", f"b{n}", rng.randint(1, 4), "root")
                task: asyncio.Future[object] = asyncio.ensure_future(
                    store.append_at_leaf(batch) if n % 2 else store.append_many(batch)
                )
                # Half the calls (both kinds of write) are cancelled before they start: no
                # yield between creating and cancelling the task, so even an adapter whose
                # writes never yield meets a cancellation. The others are cancelled after a
                # random delay, inside the write when it yields, else after it ended.
                before_start = n % 4 < 2
                if not before_start:
                    await asyncio.sleep(rng.uniform(0, 0.002))
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    # The rule: the write finished before the cancellation reached us.
                    seen = await _present(store, batch)
                    if before_start:
                        assert seen == 0, (n, seen, "a call cancelled before it started wrote")
                    assert seen in (0, len(batch)), (n, seen, len(batch))
                    cancelled.append((batch, seen))
                else:
                    assert not before_start, (n, "a call cancelled before it started ran")
                    acknowledged.append(batch)
            assert cancelled, "no call was cancelled"
            probe = _msg("c", "probe-in-process", None)
            assert (await store.append_at_leaf([probe]))[0].parent_id is not None
            if store_opener.persistent:
                await run_in_subprocess(store.url, "c", 1, "probe-other-process")
                await store.close()
                store = await store_opener.open()
            for batch in acknowledged:
                assert await _present(store, batch) == len(batch)
            for batch, seen in cancelled:
                # Nothing finished later, behind the caller's back.
                assert await _present(store, batch) == seen
            texts = [e.message.content for e in await store.list("c") if e.message]
            if store_opener.persistent:
                assert "probe-other-process-0" in texts
        finally:
            await store.close()

    async def test_cancelled_checkout_finishes_first(self, store: SessionStore) -> None:
        await store.append_many(_chain("s", "a", 3, None))
        for delay in (0, 0.0001, 0.0005, 0.001):
            task = asyncio.ensure_future(store.checkout("s", "a-0"))
            await asyncio.sleep(delay)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            leaf = await store.leaf("s")
            assert leaf in ("a-0", "a-2")
            await asyncio.sleep(0.01)
            assert await store.leaf("s") == leaf
            await store.checkout("s", "a-2")

    # -- appending at the leaf -----------------------------------------------------------

    async def test_append_at_leaf_chains_under_the_leaf(self, store: SessionStore) -> None:
        first = await store.append_at_leaf([_msg("s", "r", "ignored")])
        assert first[0].parent_id is None  # a new session: the entry is its root
        batch = [_msg("s", "x", "ignored"), _msg("s", "y", "ignored")]
        stored = await store.append_at_leaf(batch)
        assert [(e.id, e.parent_id) for e in stored] == [("x", "r"), ("y", "x")]
        assert [e.to_wire() for e in stored] == [
            (await store.get(e.id)).to_wire()  # type: ignore[union-attr]
            for e in stored
        ]
        assert await store.leaf("s") == "y" and await store.leaves("s") == ["y"]
        await store.checkout("s", "r")
        stored = await store.append_at_leaf([_msg("s", "z", "y")])
        assert stored[0].parent_id == "r"  # after a checkout, the next append forks
        assert await store.leaves("s") == ["y", "z"]
        assert await store.append_at_leaf([]) == []

    async def test_append_at_leaf_rejections_store_nothing(self, store: SessionStore) -> None:
        await store.append_many(_chain("s", "a", 2, None))
        await store.append(_msg("t", "other", None))
        before = [e.to_wire() for e in await store.list("s")]
        with pytest.raises(DuplicateEntryError):
            await store.append_at_leaf([_msg("s", "new", None), _msg("s", "a-0", None)])
        with pytest.raises(SessionMismatchError):
            await store.append_at_leaf([_msg("s", "n1", None), _msg("t", "n2", None)])
        assert [e.to_wire() for e in await store.list("s")] == before
        assert await store.leaf("s") == "a-1" and await store.get("new") is None

    async def test_gathered_appends_at_leaf_form_one_branch(self, store: SessionStore) -> None:
        # A new session: every writer races to be its root, and none may fail or fork.
        session = Session(store, "g")
        singles = [session.append_message("user", f"m{n}") for n in range(20)]
        batches = [store.append_at_leaf(_chain("g", f"b{n}", 3, None)) for n in range(10)]
        _, written = await asyncio.gather(asyncio.gather(*singles), asyncio.gather(*batches))
        assert len(await store.leaves("g")) == 1
        branch = [e.id for e in await store.entries("g")]
        assert len(branch) == 20 + 30
        assert sorted(branch) == sorted(e.id for e in await store.list("g"))
        for batch in written:
            ids = [e.id for e in batch]
            start = branch.index(ids[0])
            assert branch[start : start + 3] == ids  # a batch stays contiguous

    async def test_processes_appending_at_leaf_share_one_branch(
        self, store_opener: StoreOpener
    ) -> None:
        if not store_opener.persistent:
            pytest.skip("an in-memory store is not shared between processes")
        store = await store_opener.open()
        try:
            url = store.url
            writers = [run_in_subprocess(url, "p", 5, f"w{n}") for n in range(4)]
            await asyncio.gather(*writers, Session(store, "p").append_message("user", "here"))
            entries = await store.list("p")
            assert len(entries) == 21
            assert len(await store.leaves("p")) == 1
            assert len(await store.entries("p")) == 21
        finally:
            await store.close()

    # -- the memory head and the compare-and-append --------------------------------------

    async def test_memory_head_follows_memory_records(self, store: SessionStore) -> None:
        assert await store.memory_head("h") is None
        await store.append_many(_chain("h", "m", 3, None))
        assert await store.memory_head("h") is None
        obs = _observation("h", "m-1", "m-2")
        await store.append(obs)
        await store.append(_msg("h", "after", obs.id))
        await store.append(custom_entry("h", {"type": "host.note"}, parent_id="after"))
        assert await store.memory_head("h") == obs.id
        assert await store.memory_head("h", "m-2") is None
        await store.checkout("h", "m-2")
        assert await store.memory_head("h") is None

    async def test_stale_memory_head_stores_nothing(self, store: SessionStore) -> None:
        await store.append_many(_chain("h", "m", 3, None))
        first = _observation("h", "m-2", None)
        stored = await store.append_at_leaf([first], expected_memory_head=None)
        assert stored[0].parent_id == "m-2"
        before = [e.to_wire() for e in await store.list("h")]
        late = _observation("h", "m-1", None)
        with pytest.raises(StaleCoverageError, match=first.id):
            await store.append_at_leaf([late], expected_memory_head=None)
        assert [e.to_wire() for e in await store.list("h")] == before
        await store.append_at_leaf([late], expected_memory_head=first.id)
        assert await store.memory_head("h") == late.id

    async def test_gathered_workers_over_one_head_record_once(self, store: SessionStore) -> None:
        await store.append_many(_chain("w", "m", 4, None))
        head = await store.memory_head("w")
        results = await asyncio.gather(
            *(
                store.append_at_leaf([_observation("w", "m-3", None)], expected_memory_head=head)
                for _ in range(8)
            ),
            return_exceptions=True,
        )
        stale = [r for r in results if isinstance(r, StaleCoverageError)]
        assert len(stale) == 7, results
        records = [e for e in await store.list("w") if e.custom_type == OBSERVATIONS_RECORDED]
        assert len(records) == 1

    # -- page_messages arguments ---------------------------------------------------------

    async def test_page_messages_checks_limit_and_direction(self, store: SessionStore) -> None:
        await store.append_many(_chain("pg", "m", 5, None))
        for bad in (-5, -1, 0, True, 2.5, "3", None):
            for direction in ("forward", "backward"):
                with pytest.raises(InvalidInputError, match="limit"):
                    await store.page_messages("pg", "m-2", bad, direction)  # type: ignore[arg-type]
        with pytest.raises(PageTooLargeError):
            await store.page_messages("pg", "m-2", 101)
        with pytest.raises(InvalidInputError, match="direction"):
            await store.page_messages("pg", "m-2", 2, "sideways")  # type: ignore[arg-type]
        page, more = await store.page_messages("pg", "m-2", 100, "backward")
        assert [e.id for e in page] == ["m-0", "m-1"] and not more
        page, more = await store.page_messages("pg", "m-0", 1)
        assert [e.id for e in page] == ["m-1"] and more
