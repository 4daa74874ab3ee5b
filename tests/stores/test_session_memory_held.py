"""What a store keeps in the process per message: the JSONL adapter its place in the file
(plus a bounded cache), the in-memory adapter its body once.

Counted with ``tracemalloc`` (the bytes Python allocated and still holds), not timed: the
messages are large and distinct, so a store holding every body, or one body twice, shows
as a multiple of the text appended.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

from prism_om.session import Session
from prism_om.stores.jsonl import JsonlStore
from prism_om.stores.memory import MemoryStore
from prism_om.stores.segment_index.lazy_entries import BODY_CACHE_BYTES
from prism_om.tokens import get_estimator

MESSAGES = 1000
WORDS = 3000  # ~20 KB of text per message, 21 MB in all


def _texts() -> list[str]:
    rng = random.Random(4)
    vocab = ["".join(rng.choices("abcdefghij", k=rng.randint(3, 9))) for _ in range(500)]
    return [f"{n} " + " ".join(rng.choices(vocab, k=WORDS)) for n in range(MESSAGES)]


async def _held(fill: Callable[[list[str]], Awaitable[object]]) -> tuple[int, int]:
    """(bytes still allocated after ``fill``, bytes of text it appended); the texts are
    made while traced, so a store that keeps them shows them."""
    get_estimator().count("loaded before the count starts")  # the encoding: 12 MB, once
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        texts = _texts()
        text_bytes = sum(len(t) for t in texts)
        kept = await fill(texts)
        del texts
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    del kept
    return held, text_bytes


async def _append_and_read(store: JsonlStore | MemoryStore, texts: list[str]) -> None:
    session = Session(store, "s1")
    for n, text in enumerate(texts):
        await session.append_message("user" if n % 2 == 0 else "assistant", text)
    # The reads of a turn, and one of the whole branch (returned, then dropped).
    assert len(await store.entries("s1")) == len(texts)
    # Last, so that the event loop's own last result is no longer the whole branch.
    assert len(await store.recent_messages("s1", 20)) == 20


async def test_jsonl_holds_no_message_bodies_beyond_its_cache(tmp_path: Path) -> None:
    async def fill(texts: list[str]) -> object:
        store = await JsonlStore.open(tmp_path, fsync=False)
        await _append_and_read(store, texts)
        return store

    held, text = await _held(fill)
    # The cache (lines of at most BODY_CACHE_BYTES, parsed) and a few hundred bytes per
    # entry: not the text.
    assert held < BODY_CACHE_BYTES * 2 + MESSAGES * 1000 < text // 2, (held, text)


async def test_a_jsonl_reopen_reads_a_page_without_holding_the_session(tmp_path: Path) -> None:
    async with await JsonlStore.open(tmp_path, fsync=False) as store:
        await _append_and_read(store, _texts())

    async def fill(texts: list[str]) -> object:
        store = await JsonlStore.open(tmp_path, fsync=False)
        recent = await store.recent_messages("s1", 20)
        page, _ = await store.page_messages("s1", recent[0].id, 20, "backward")
        assert len(page) == 20
        return store

    held, text = await _held(fill)
    # 40 messages' bodies and the session's ids, not its text.
    assert held < 40 * WORDS * 20 + MESSAGES * 1000 < text // 4, (held, text)


async def test_the_memory_store_holds_each_body_once() -> None:
    async def fill(texts: list[str]) -> object:
        store = MemoryStore()
        await _append_and_read(store, texts)
        return store

    held, text = await _held(fill)
    # Every body once (the text itself, as Python strings) and a few KB per entry: a
    # second copy of each would add the text again.
    assert text < held < text + MESSAGES * 4000, (held, text)
