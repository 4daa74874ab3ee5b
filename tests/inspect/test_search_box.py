"""The inspect page's search box: ranked hits of the chosen branch, memory hits opening
their recall in place, message hits linking to the timeline, withheld and redacted like
every other page, bad input a 400."""

from __future__ import annotations

import html
import re

from support.inspect_store import REVOKED_MESSAGE, REVOKED_OBSERVATION, SECRET, XSS

from .conftest import Inspected


async def test_hits_open_their_sources_in_place(inspected: Inspected) -> None:
    session = (await inspected.client.get("/s/demo")).text
    assert 'action="/s/demo/search"' in session
    response = await inspected.client.get("/s/demo/search", params={"q": "billing rust"})
    assert response.status_code == 200
    page = response.text
    hits = re.findall(r'<li class="mem hit kind-(\w+)" id="hit-([^"]+)"', page)
    assert {kind for kind, _ in hits} >= {"message"}, page
    memory = [i for kind, i in hits if kind != "message"]
    assert memory, "the billing memory is found"
    assert f"/s/demo/recall?id={memory[0]}" in page  # the recall fragment opens in place
    recall = await inspected.client.get(f"/s/demo/recall?id={memory[0]}")
    assert recall.status_code == 200
    message = next(i for kind, i in hits if kind == "message")
    assert f"cursor={message}" in page
    only = await inspected.client.get("/s/demo/search", params={"q": "billing", "kind": "message"})
    kinds = set(re.findall(r'class="mem hit kind-(\w+)"', only.text))
    assert kinds == {"message"}


async def test_revoked_and_secret_text_never_comes_back(inspected: Inspected) -> None:
    for query in ("phone number", "on-call 555", "api key", SECRET, "snippet title"):
        page = (await inspected.client.get("/s/demo/search", params={"q": query})).text
        assert REVOKED_MESSAGE not in page and REVOKED_OBSERVATION not in page
        assert SECRET not in page and html.escape(SECRET) not in page
        assert XSS not in page  # escaped by the template


async def test_bad_input_is_a_400(inspected: Inspected) -> None:
    for params in ({"q": "x" * 501}, {"q": "a", "kind": "memory"}, {"q": "a", "leaf": "no-leaf"}):
        response = await inspected.client.get("/s/demo/search", params=params)
        assert response.status_code in (400, 404), (params, response.status_code)
    many = " ".join(f"w{n}" for n in range(40))
    response = await inspected.client.get("/s/demo/search", params={"q": many})
    assert response.status_code == 400 and "32" in response.text
