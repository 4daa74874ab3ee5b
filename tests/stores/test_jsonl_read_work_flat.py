"""The bench's JSONL recall and page do the same work at two session sizes.

Issue 16's bench run printed JSONL recall and page 1.38x / 1.51x slower at 100k than at
10k. These are exactly the bench's read workloads (``bench.data`` session, built with
``append_many`` in the bench's batches; the public recall and page at its middle ids),
counted rather than timed: Python and C function calls made by prism_om's code per call
on every thread (the store reads on a worker thread), and lines parsed
(``entry_from_wire``), both on the store that built the session and on a reopen whose
index sidecar left lines unparsed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from bench.data import SESSION_ID, build_dataset
from bench.workloads import BUILD_BATCH
from prism_om.entries import SessionEntry, entry_from_wire
from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore, open_store
from prism_om.stores.jsonl import loading as jsonl_loading
from prism_om.stores.jsonl import store as jsonl

SIZES = (1_000, 10_000)
_OURS = str(Path(jsonl.__file__).parents[1])


class Work:
    """Function calls (every thread) and lines parsed while ``counting``."""

    def __init__(self) -> None:
        self.calls: dict[int, int] = {}
        self.parsed = 0
        self.counting = False

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        # Only calls made by our own code: the event loop's own iterations while it waits
        # for the worker thread grow with machine load, not with the session.
        if self.counting and event in ("call", "c_call") and _OURS in frame.f_code.co_filename:
            tid = threading.get_ident()  # one key per thread: no lost increments
            self.calls[tid] = self.calls.get(tid, 0) + 1

    def parse(self, wire: object, *, where: str = "entry") -> SessionEntry:
        if self.counting:
            self.parsed += 1
        return entry_from_wire(wire, where=where)

    async def of(self, call: Callable[[], Awaitable[object]]) -> tuple[int, int]:
        self.calls.clear()
        self.parsed = 0
        self.counting = True
        try:
            await call()
        finally:
            self.counting = False
        return sum(self.calls.values()), self.parsed


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Iterator[Work]:
    counter = Work()
    monkeypatch.setattr(jsonl_loading, "entry_from_wire", counter.parse)
    # Threads started from here on (the loop's executor, where the store reads) count too.
    threading.setprofile(counter.hook)
    sys.setprofile(counter.hook)
    try:
        yield counter
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


async def _build(store: SessionStore, size: int) -> tuple[str, str]:
    """The bench's session of ``size`` entries; its page cursor and recalled memory id."""
    dataset = build_dataset(size)
    for i in range(0, size, BUILD_BATCH):
        await store.append_many(dataset.entries[i : i + BUILD_BATCH])
    return dataset.middle_message_id(), dataset.middle_memory_id()[0]


def _bench_reads(store: SessionStore, cursor: str, memory_id: str) -> dict[str, Callable[[], Any]]:
    return {
        "page": lambda: recall_observational_memory_branch_page(
            store, cursor, session_id=SESSION_ID, limit=20
        ),
        "recall": lambda: recall_observational_memory(store, memory_id, session_id=SESSION_ID),
    }


async def _steady_work(
    work: Work, reads: dict[str, Callable[[], Any]]
) -> dict[str, tuple[int, int]]:
    counted = {}
    for name, read in reads.items():
        await read()  # the first read of an entry may parse it once; the bench warms up too
        counted[name] = await work.of(read)
    return counted


async def test_bench_recall_and_page_work_is_the_same_at_two_sizes(
    tmp_path: Path, work: Work
) -> None:
    per_size = []
    for size in SIZES:
        store = await open_store(f"jsonl:{tmp_path / str(size)}")
        try:
            reads = _bench_reads(store, *await _build(store, size))
            per_size.append(await _steady_work(work, reads))
        finally:
            await store.close()
    small, large = per_size
    for name in ("page", "recall"):
        assert large[name][1] == small[name][1] == 0, name  # nothing parsed per call
        # Same calls at 10x the session, give or take a lookup's depth.
        assert small[name][0] > 100, (name, small[name])  # the hook sees the read's work
        assert large[name][0] <= small[name][0] + 10, (name, small[name], large[name])


async def test_reopened_recall_and_page_parse_only_what_they_return(
    tmp_path: Path, work: Work
) -> None:
    per_size = []
    for size in SIZES:
        url = f"jsonl:{tmp_path / str(size)}"
        store = await open_store(url)
        try:
            ids = await _build(store, size)
        finally:
            await store.close()
        store = await open_store(url)
        try:
            # The first read loads the session: a reopen's cost (the bench's cold start).
            await store.leaves(SESSION_ID)
            reads = _bench_reads(store, *ids)
            first = {name: (await work.of(read))[1] for name, read in reads.items()}
            again = {name: (await work.of(read))[1] for name, read in reads.items()}
        finally:
            await store.close()
        per_size.append((first, again))
    for first, again in per_size:
        assert first["page"] <= 21  # the page's 20 messages and its cursor, at most
        assert first["recall"] <= 2  # the recalled observation's source, at most
        assert again == {"page": 0, "recall": 0}
