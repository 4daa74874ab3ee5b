"""The packed message postings (schema 8) read exactly what a scan finds: for each query
key, the newest ``SEARCH_CANDIDATES_PER_TERM`` messages of the branch holding it, on a
branch of many pieces whose blocks straddle the pieces' ends, with the cap made small so
that the block limit cuts (the trusted-blocks answer) and runs out (the read again)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import prism_om.stores.sql.search_index as search_index
from prism_om.entries import SessionEntry
from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.testing.generate import make_message

WORDS = ("alpha", "beta", "gamma")


def _message(n: int, parent: str | None, tag: str) -> SessionEntry:
    # Every message holds alpha; beta every third; gamma only on forks.
    words = ["alpha report", tag] + (["beta"] if n % 3 == 0 else [])
    return make_message("s", f"m-{tag}-{n}", parent, "user", " ".join(words) + f" {n}", n + 1)


def _branches() -> tuple[list[list[SessionEntry]], list[str]]:
    """Batches to append in order (each after a checkout of its parent), and leaves."""
    trunk: list[SessionEntry] = []
    parent = None
    for n in range(4_700):  # blocks 0-18 of the first segment: more than 2 + 16 blocks
        trunk.append(_message(n, parent, "trunk"))
        parent = trunk[-1].id
    batches, leaves = [trunk], [trunk[-1].id]
    # A chain of short forks, each from the middle of the one before: many pieces, each
    # a few depths of a block that the pieces around it share.
    at = trunk[4_000]
    for f in range(40):
        fork = []
        parent = at.id
        for n in range(6):
            fork.append(_message(10_000 * (f + 1) + n, parent, f"gamma{f % 3}"))
            parent = fork[-1].id
        batches.append(fork)
        at = fork[2]
    leaves.append(batches[-1][-1].id)
    leaves.append(batches[20][-1].id)
    return batches, leaves


@pytest.fixture(params=["sqlite", "postgres"])
async def stores(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[SessionStore, MemoryStore, list[str]]]:
    url = f"sqlite:{tmp_path / 's.db'}" if request.param == "sqlite" else None
    if url is None:
        url = request.getfixturevalue("postgres_url")
    store, reference = await open_store(url), MemoryStore()
    batches, leaves = _branches()
    for target in (store, reference):
        for batch in batches:
            if batch[0].parent_id is not None:
                await target.checkout("s", batch[0].parent_id)
            await target.append_many(batch)
    try:
        yield store, reference, leaves
    finally:
        await store.close()


@pytest.mark.parametrize("cap", [2, 5, 40, 200])
async def test_a_small_cap_reads_what_a_scan_finds(
    stores: tuple[SessionStore, MemoryStore, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    cap: int,
) -> None:
    store, reference, leaves = stores
    import prism_om.stores.search as search
    import prism_om.stores.sql.reads as reads

    monkeypatch.setattr(search, "SEARCH_CANDIDATES_PER_TERM", cap)
    monkeypatch.setattr(reads, "SEARCH_CANDIDATES_PER_TERM", cap)
    again: list[Any] = []
    blocks_sql = search_index._message_blocks_sql

    def counted(count: int) -> str:
        again.append(count)
        return blocks_sql(count)

    monkeypatch.setattr(search_index, "_message_blocks_sql", counted)
    for leaf in leaves:
        for query in ("alpha", "alpha beta", "beta gamma0", "gamma1 gamma2 report"):
            expected = await reference.search("s", query, leaf_id=leaf, limit=100)
            got = await store.search("s", query, leaf_id=leaf, limit=100)
            assert got == expected, (cap, leaf, query)
            assert expected
    # The trunk's 19 blocks are cut by the limit of the smallest caps and the blocks above
    # the cut answer; the forks' leaves have ~40 pieces of one or two block numbers, where
    # the trusted blocks do not hold enough, so a key is read again.
    if cap <= 5:
        assert len(again) > len(leaves) * 4
