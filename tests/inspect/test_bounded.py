"""Responses stay bounded whatever the store holds: long texts are clipped, lists capped."""

from __future__ import annotations

import httpx

from prism_om.inspect import create_inspect_app
from prism_om.inspect.views import BLOCK_MAX_CHARS, TEXT_MAX_CHARS
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore

BASE = "http://127.0.0.1:8787"


async def test_a_huge_message_is_clipped_on_every_page() -> None:
    store = MemoryStore()
    session = Session(store, "big")
    huge = "word " * 40_000  # 200,000 characters
    for _ in range(5):
        await session.append_message("user", huge)
    app = create_inspect_app(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        for url in ("/s/big", "/s/big/timeline?limit=200", "/s/big/charts", "/"):
            response = await client.get(url)
            assert response.status_code == 200, url
            # 1,000,000 characters of transcript; the context blocks are capped at 60,000.
            assert len(response.content) < 2 * BLOCK_MAX_CHARS + 5 * TEXT_MAX_CHARS + 20_000
        timeline = (await client.get("/s/big/timeline")).text
        assert timeline.count("…") == 5
        assert huge[:TEXT_MAX_CHARS] not in timeline


async def test_the_timeline_never_answers_more_than_its_limit() -> None:
    store = MemoryStore()
    session = Session(store, "long")
    for n in range(450):
        await session.append_message("user", f"message {n}")
    app = create_inspect_app(store)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=BASE) as client:
        page = (await client.get("/s/long")).text
        assert page.count('class="entry ') == 50
        fragment = (await client.get("/s/long/timeline", params={"limit": "200"})).text
        assert fragment.count('class="entry ') == 200
        assert "message 449" in fragment and "message 249" not in fragment
