"""The workloads on our own adapters (memory, JSONL, SQLite, PostgreSQL)."""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import TypeVar

from prism_om import ContextBlock
from prism_om.entries import SessionEntry
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores import SessionStore, open_store

from .data import SESSION_ID, Dataset, capped_entries
from .jsonl_floor import run_jsonl_reopen_floor
from .memprobe import probe_peak_rss
from .model import Result
from .paired import PAIRED_ROUNDS, RoundTrip, paired_reads
from .timing import Timer, time_calls

__all__ = ["AppendSample", "RecallFn", "adapter_url", "resolve_recall", "run_adapter"]

BUILD_BATCH = 1000
_T = TypeVar("_T")

RecallFn = Callable[[SessionStore, str, str], Awaitable[object]]
"""(store, memory id, a source entry id of that memory) -> whatever recall answers."""


@dataclass(frozen=True)
class AppendSample:
    """Entries appended on top of the prepared store: batches of 100, then singles."""

    batches: list[list[SessionEntry]]
    singles: list[SessionEntry]


def resolve_recall() -> tuple[str, RecallFn]:
    """The recall the benchmark times: the public exact-id recall on a store.

    ``recall_observational_memory(store, memory_id, session_id=...)``: the ledger's rows
    of that id (``store.memory_subset``) plus its source entries, on every adapter.
    """

    async def recall(store: SessionStore, memory_id: str, source_id: str) -> object:
        return await recall_observational_memory(store, memory_id, session_id=SESSION_ID)

    return "recall_observational_memory(store, id, session_id=...)", recall


def adapter_url(adapter: str, workdir: str, size: int) -> str:
    """Where an adapter's prepared store for ``size`` lives."""
    if adapter == "memory":
        return "memory:"
    if adapter == "jsonl":
        return f"jsonl:{os.path.join(workdir, f'jsonl-{size}')}"
    return f"sqlite:{os.path.join(workdir, f'sqlite-{size}.db')}"


async def _build(store: SessionStore, entries: Sequence[SessionEntry]) -> float:
    start = time.perf_counter()
    for i in range(0, len(entries), BUILD_BATCH):
        await store.append_many(entries[i : i + BUILD_BATCH])
    return time.perf_counter() - start


async def _cold_start(url: str, timer: Timer) -> list[float]:
    """Open + leaf + recent_messages(20), closing (untimed) after each; warm OS cache."""
    samples: list[float] = []
    spent = 0.0
    for attempt in range(timer.repeat + 1):
        start = time.perf_counter()
        store = await open_store(url)
        await store.leaf(SESSION_ID)
        await store.recent_messages(SESSION_ID, 20)
        took = time.perf_counter() - start
        await store.close()
        spent += took
        if attempt or took > timer.budget_s / 6:
            # The first open warms the page cache, unless it is slow enough to stand alone.
            samples.append(took)
        if spent > timer.budget_s / 6 and samples:
            break
    return samples


async def run_adapter(
    adapter: str,
    dataset: Dataset,
    sample: AppendSample,
    workdir: str,
    timer: Timer,
    recall: tuple[str, RecallFn],
    log: Callable[[str], None],
    round_trips: Callable[[], AbstractAsyncContextManager[Sequence[RoundTrip]]] | None = None,
    url: str | None = None,
) -> list[Result]:
    """Every workload on one adapter at one size.

    With ``round_trips`` (the driver's round trip, for SQLite and PostgreSQL) the page,
    raw page and recall are timed in rounds paired with each round trip it gives
    (``bench.paired.paired_reads``), and the round trips' results are kept; without,
    each is a ``timer`` median. ``url`` overrides where the store lives (PostgreSQL: a
    schema on the server).
    """
    url = url or adapter_url(adapter, workdir, dataset.size)
    size = dataset.size
    results: list[Result] = []

    def add(workload: str, samples: list[float], note: str = "", **extra: float) -> None:
        results.append(Result(workload, adapter, size, samples, note=note, extra=dict(extra)))

    store = await open_store(url)
    try:
        built = await _build(store, dataset.entries)
        log(f"  {adapter}: built {size:,} entries in {built:.1f} s")
        cursor = dataset.middle_message_id()
        memory_id, source_id = dataset.middle_memory_id()
        recall_name, recall_fn = recall
        await _check_reads(store, cursor, memory_id, source_id, recall_fn)

        async def page() -> object:
            return await recall_observational_memory_branch_page(
                store, cursor, session_id=SESSION_ID, limit=20
            )

        async def raw_page() -> object:
            return await store.page_messages(SESSION_ID, cursor, 20, "forward")

        async def recall_call() -> object:
            return await recall_fn(store, memory_id, source_id)

        reads = {
            "page20": (page, "recall_observational_memory_branch_page"),
            "page20_raw": (raw_page, "store.page_messages"),
            "recall": (recall_call, recall_name),
        }
        if round_trips is None:
            for key, (call, note) in reads.items():
                add(key, await timer.measure(call), note=note)
        else:
            async with round_trips() as trips:
                results += await paired_reads(
                    reads,
                    trips,
                    adapter,
                    size,
                    rounds=max(PAIRED_ROUNDS, timer.repeat),
                    min_block_s=timer.min_sample_s,
                )
        add("branch", await timer.measure(lambda: store.entries(SESSION_ID)))

        async def store_path() -> list[ContextBlock]:
            return await build_observational_memory_context_blocks(store, session_id=SESSION_ID)

        async def pure_path() -> list[ContextBlock]:
            # The entries form of the builder runs fold_observational_memory_ledger itself.
            return build_observational_memory_context_blocks(await store.entries(SESSION_ID))

        same = [b.text for b in await store_path()] == [b.text for b in await pure_path()]
        add(
            "context",
            await timer.measure(store_path),
            note="" if same else "store path and pure fold DISAGREE",
        )
        add("context_pure", await timer.measure(pure_path), note="branch() + fold + blocks")
        log(f"  {adapter}: reads done")
        if adapter == "sqlite":
            results += await _capped_context(dataset, workdir, timer, log)
        if adapter != "memory":
            # A file store is closed for the reopen and memory probes, then opened again.
            await store.close()
            add("cold_start", await _cold_start(url, timer), note="warm OS page cache")
        if adapter == "jsonl":
            # Its floor right after it, so their ratio is taken side by side.
            results.append(await run_jsonl_reopen_floor(url.removeprefix("jsonl:"), size, timer))
        peak, baseline = await probe_peak_rss(adapter, url, size)
        add("peak_rss", [peak], note="cold start + one turn", baseline=baseline)
        results[-1].unit = "bytes"
        if adapter != "memory":
            store = await open_store(url)
        batch_calls = [_appender(store.append_many, b) for b in sample.batches]
        samples, _ = await time_calls(batch_calls, groups=timer.repeat)
        add("append_batch", samples)
        single_calls = [_appender(store.append, e) for e in sample.singles]
        samples, made = await time_calls(single_calls, groups=timer.repeat)
        add("append_single", samples, note=f"{made:,} calls on top of the prepared store")
    finally:
        await store.close()
    log(f"  {adapter}: appends done")
    return results


async def _capped_context(
    dataset: Dataset, workdir: str, timer: Timer, log: Callable[[str], None]
) -> list[Result]:
    """ledger() + context blocks of the same transcript with a dropper capping the pool
    (``data.capped_entries``), against the pure fold of that session; SQLite only."""
    entries = capped_entries(dataset)
    url = f"sqlite:{os.path.join(workdir, f'sqlite-capped-{dataset.size}.db')}"
    results: list[Result] = []
    async with await open_store(url) as store:
        built = await _build(store, entries)
        log(f"  sqlite: built the capped session ({len(entries):,} entries) in {built:.1f} s")

        async def store_path() -> list[ContextBlock]:
            return await build_observational_memory_context_blocks(store, session_id=SESSION_ID)

        async def pure_path() -> list[ContextBlock]:
            return build_observational_memory_context_blocks(await store.entries(SESSION_ID))

        blocks = await store_path()
        same = [b.text for b in blocks] == [b.text for b in await pure_path()]
        live = len((await store.live_ledger(SESSION_ID)).observations_by_id)
        note = f"{live:,} live observations" + ("" if same else "; store path and fold DISAGREE")
        for key, call, text in (
            ("context_capped", store_path, note),
            ("context_capped_pure", pure_path, "branch() + fold + blocks"),
        ):
            samples = await timer.measure(call)
            results.append(Result(key, "sqlite", dataset.size, samples, note=text))
    return results


async def _check_reads(
    store: SessionStore, cursor: str, memory_id: str, source_id: str, recall_fn: RecallFn
) -> None:
    """The timed reads must answer what they claim: 20 messages, the memory and its source."""
    page = await recall_observational_memory_branch_page(
        store, cursor, session_id=SESSION_ID, limit=20
    )
    if len(page.messages) != 20:
        raise RuntimeError(f"page of 20 returned {len(page.messages)} messages")
    found = await recall_fn(store, memory_id, source_id)
    sources = [s.get("id") for s in getattr(found, "sources", ())]
    if not getattr(found, "found", False) or source_id not in sources:
        raise RuntimeError(f"recall of {memory_id} did not return its source {source_id}")


def _appender(method: Callable[[_T], Awaitable[None]], arg: _T) -> Callable[[], Awaitable[None]]:
    async def call() -> None:
        await method(arg)

    return call
