"""Shipped assets are served as shipped, and ``HEAD`` is answered like ``GET``.

The reviewer's findings: with ``PRISM_SECRETS=const`` the page's script came back with
``[REDACTED]`` in place of every ``const`` (a broken page), and ``HEAD`` was a 405.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support.damaged_store import filled_store
from support.inspect_store import SECRET, USER_TURNS

import prism_om.inspect
from prism_om.inspect import create_inspect_app
from prism_om.stores import open_store

STATIC = Path(prism_om.inspect.__file__).parent / "static"
ASSETS = sorted(p.name for p in STATIC.iterdir() if p.is_file())
BASE = "http://127.0.0.1:8787"


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_assets_are_served_unredacted_and_hold_no_store_text(
    tmp_path: Path, kind: str
) -> None:
    assert {"inspect.js", "inspect.css"} <= set(ASSETS)
    url = await filled_store(kind, tmp_path)
    # Words the script and the style sheet are made of, as secrets.
    secrets = ["const", "function", "color", "display", SECRET]
    async with await open_store(url, read_only=True) as store:
        app = create_inspect_app(store, port=8787, secrets=secrets)
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=BASE
        ) as client:
            for name in ASSETS:
                response = await client.get(f"/static/{name}")
                assert response.status_code == 200
                shipped = (STATIC / name).read_bytes()
                assert response.content == shipped, name
                text = shipped.decode("utf-8")
                assert "[REDACTED]" not in text
                # An asset is package text: nothing from the store is in it.
                assert SECRET not in text
                for turn in USER_TURNS:
                    assert turn[:30] not in text
            # Store text is still redacted, down to those words.
            page = (await client.get("/s/demo")).text
            assert "[REDACTED]" in page and SECRET not in page


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
async def test_head_is_answered_like_get_without_a_body(tmp_path: Path, kind: str) -> None:
    url = await filled_store(kind, tmp_path)
    async with await open_store(url, read_only=True) as store:
        app = create_inspect_app(store, port=8787, secrets=[SECRET])
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url=BASE
        ) as client:
            for path in ("/", "/s/demo", "/s/demo/charts", "/static/inspect.js", "/s/nope"):
                got = await client.get(path)
                head = await client.head(path)
                assert head.status_code == got.status_code, path
                assert head.content == b""
                assert head.headers["content-length"] == str(len(got.content)), path
                assert head.headers["content-type"] == got.headers["content-type"]
                assert head.headers["x-content-type-options"] == "nosniff"
            refused = await client.post("/")
            assert refused.status_code == 405
            assert refused.headers["allow"] == "GET, HEAD"
            rebound = await client.head("/", headers={"host": "attacker.example"})
            assert rebound.status_code == 421 and rebound.content == b""
