"""Fixtures of the inspect page's tests: a filled store on SQLite or JSONL, and a client."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from support.inspect_store import SECRET, Filled, fill_store

from prism_om.inspect import create_inspect_app
from prism_om.stores import SessionStore, open_store

PORT = 8787
BASE = f"http://127.0.0.1:{PORT}"


@dataclass
class Inspected:
    client: httpx.AsyncClient
    filled: Filled
    store: SessionStore
    root: Path
    """The directory holding the store's files."""


def store_url(kind: str, root: Path) -> str:
    return f"sqlite:{root / 'store.db'}" if kind == "sqlite" else f"jsonl:{root / 'store'}"


@pytest.fixture(params=["sqlite", "jsonl"])
async def inspected(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Inspected]:
    url = store_url(request.param, tmp_path)
    async with await open_store(url, create=True) as store:
        filled = await fill_store(store)
    async with await open_store(url, read_only=True) as store:
        app = create_inspect_app(store, port=PORT, secrets=[SECRET])
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            yield Inspected(client, filled, store, tmp_path)
