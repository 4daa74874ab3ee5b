"""Shared fixtures: every store URL the conformance suite runs against."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener

# Helpers in tests/support/ assert too: rewrite them so their failures read like a test's.
pytest.register_assert_rewrite("support")

ADAPTERS = ["memory", "jsonl", "sqlite"]


def opener_for(kind: str, tmp_path: Path) -> StoreOpener:
    """A ``StoreOpener`` for one adapter kind, rooted in ``tmp_path``."""
    if kind == "memory":
        # One shared object, so "reopen" sees the same data, yet close() is honoured.
        async def open_memory() -> SessionStore:
            return MemoryStore()

        return StoreOpener(open_memory, persistent=False)
    url = f"jsonl:{tmp_path / 'store'}" if kind == "jsonl" else f"sqlite:{tmp_path / 'store.db'}"

    async def open_url() -> SessionStore:
        return await open_store(url)

    return StoreOpener(open_url, persistent=True)


@pytest.fixture(params=ADAPTERS)
def store_opener(request: pytest.FixtureRequest, tmp_path: Path) -> StoreOpener:
    return opener_for(request.param, tmp_path)


@pytest.fixture
def make_opener(tmp_path: Path) -> Callable[[str], StoreOpener]:
    return lambda kind: opener_for(kind, tmp_path / kind)


@pytest.fixture
async def store(store_opener: StoreOpener) -> AsyncIterator[SessionStore]:
    """An open store of each adapter kind, closed after the test."""
    opened = await store_opener.open()
    try:
        yield opened
    finally:
        await opened.close()
