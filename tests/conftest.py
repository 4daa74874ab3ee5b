"""Shared fixtures: every store URL the conformance suite runs against."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from prism_om.stores import SessionStore, open_store
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener

# Helpers in tests/support/ assert too: rewrite them so their failures read like a test's.
pytest.register_assert_rewrite("support")

ADAPTERS = ["memory", "jsonl", "sqlite", "postgres"]


@pytest.fixture(scope="session")
def nobody_python() -> Iterator[list[str]]:
    """A command running Python as the unprivileged user nobody, with prism_om importable
    from a copy that user can read, wherever the checkout is (support/other_user.py)."""
    from support.other_user import python_for_nobody, reachable_dir

    with reachable_dir("prism-om-nobody-") as root:
        yield python_for_nobody(root)


@pytest.fixture(scope="session")
def postgres_base_url() -> Iterator[str]:
    """One PostgreSQL server for the whole session (support/postgres.py says which)."""
    from support.postgres import URL_VARIABLE, throwaway_cluster, unavailable

    if importlib.util.find_spec("psycopg") is None:
        unavailable("the PostgreSQL driver is not installed: pip install -e '.[postgres]'")
    if os.environ.get(URL_VARIABLE):
        yield os.environ[URL_VARIABLE]
        return
    with throwaway_cluster() as url:
        yield url


def opener_for(kind: str, tmp_path: Path, postgres_url: str | None = None) -> StoreOpener:
    """A ``StoreOpener`` for one adapter kind, rooted in ``tmp_path`` (or ``postgres_url``)."""
    if kind == "memory":
        # One shared object, so "reopen" sees the same data, yet close() is honoured.
        async def open_memory() -> SessionStore:
            return MemoryStore()

        return StoreOpener(open_memory, persistent=False)
    if kind == "postgres":
        assert postgres_url is not None, "a postgres opener needs the test's schema URL"
        url = postgres_url
    elif kind == "jsonl":
        url = f"jsonl:{tmp_path / 'store'}"
    else:
        url = f"sqlite:{tmp_path / 'store.db'}"

    async def open_url() -> SessionStore:
        return await open_store(url)

    return StoreOpener(open_url, persistent=True)


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh schema on the session's server, so every test starts from nothing."""
    from support.postgres import URL_VARIABLE, drop_schema, with_fresh_schema

    url = with_fresh_schema(request.getfixturevalue("postgres_base_url"))
    yield url
    if os.environ.get(URL_VARIABLE):
        # Someone else's server: leave it as found. A throwaway cluster goes whole.
        with contextlib.suppress(Exception):
            drop_schema(url)


@pytest.fixture(params=ADAPTERS)
def store_opener(request: pytest.FixtureRequest, tmp_path: Path) -> StoreOpener:
    if request.param == "postgres":
        return opener_for("postgres", tmp_path, request.getfixturevalue("postgres_url"))
    return opener_for(request.param, tmp_path)


@pytest.fixture
def make_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[str], StoreOpener]:
    def make(kind: str) -> StoreOpener:
        if kind == "postgres":
            return opener_for(kind, tmp_path / kind, request.getfixturevalue("postgres_url"))
        return opener_for(kind, tmp_path / kind)

    return make


@pytest.fixture
async def store(store_opener: StoreOpener) -> AsyncIterator[SessionStore]:
    """An open store of each adapter kind, closed after the test."""
    opened = await store_opener.open()
    try:
        yield opened
    finally:
        await opened.close()
