"""Every route of the inspect page answers, on SQLite and JSONL stores alike."""

from __future__ import annotations

import re
from urllib.parse import quote

from support.inspect_store import REVOKED_OBSERVATION, SUPERSEDING_REFLECTION

from .conftest import Inspected


def memory_ids(page: str) -> list[str]:
    return re.findall(r"/recall\?id=([0-9a-f]{12})", page)


async def test_sessions_page_lists_every_session_with_counts(inspected: Inspected) -> None:
    response = await inspected.client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    page = response.text
    assert 'data-session="demo"' in page and 'data-session="other-session"' in page
    row = re.search(r'<tr data-session="demo">(.*?)</tr>', page, re.S)
    assert row is not None
    numbers = re.findall(r'<td class="num">(\d+)</td>', row.group(1))
    entries, messages, leaves, pool = (int(n) for n in numbers)
    assert leaves == 2 and messages == 16 and entries > messages and pool > 0
    filtered = await inspected.client.get("/", params={"q": "OTHER"})
    assert 'data-session="other-session"' in filtered.text
    assert 'data-session="demo"' not in filtered.text


async def test_session_page_shows_branches_memory_and_timeline(inspected: Inspected) -> None:
    filled = inspected.filled
    page = (await inspected.client.get("/s/demo")).text
    # Branches: both leaves, the current one marked, the fork with its fork point.
    assert f'data-leaf="{filled.main_leaf}"' in page and f'data-leaf="{filled.fork_leaf}"' in page
    assert "● current leaf" in page and "forks after #4" in page
    # The next turn's context, with a gauge per threshold.
    assert "observational-memory ·" in page and "recent-messages ·" in page
    for key in ("observation.messageTokens", "reflection.observationTokens"):
        assert key in page
    assert "context.compactAfterTokens" in page
    # Memory in every state.
    for state in ("active", "dropped", "invalidated", "superseded"):
        assert f"mem state-{state}" in page, state
    assert f'id="m-{REVOKED_OBSERVATION}"' in page
    # The timeline's last page ends at the current leaf, records and drops included.
    assert f'id="e-{filled.main_leaf}"' in page
    assert "observation(s) dropped" in page and "observer pass" in page
    timeline = page.split('id="timeline"', 1)[1]
    assert filled.fork_text not in timeline


async def test_choosing_the_fork_leaf_shows_that_branch(inspected: Inspected) -> None:
    filled = inspected.filled
    response = await inspected.client.get("/s/demo", params={"leaf": filled.fork_leaf})
    assert response.status_code == 200
    timeline = response.text.split('id="timeline"', 1)[1]
    assert filled.fork_text in timeline
    assert f'id="e-{filled.main_leaf}"' not in timeline
    # Memory recorded after the fork point is not on the fork's branch.
    assert SUPERSEDING_REFLECTION not in response.text


async def test_timeline_pages_by_cursor_both_ways(inspected: Inspected) -> None:
    client, sid = inspected.client, "demo"
    branch = [e.id for e in await inspected.store.entries(sid)]
    seen: list[str] = []
    params: dict[str, str] = {"limit": "4"}
    for _ in range(len(branch)):
        page = (await client.get(f"/s/{sid}/timeline", params=params)).text
        ids = re.findall(r'data-entry="([^"]+)"', page)
        assert 0 < len(ids) <= 4
        seen = ids + seen
        older = re.search(r'class="older" href="[^"]*cursor=([^&"]+)', page)
        if older is None:
            break
        params = {"limit": "4", "cursor": older.group(1), "dir": "back"}
    assert seen == branch
    forward: list[str] = []
    params = {"limit": "5", "cursor": branch[0], "dir": "forward"}
    while True:
        page = (await client.get(f"/s/{sid}/timeline", params=params)).text
        forward += re.findall(r'data-entry="([^"]+)"', page)
        newer = re.search(r'class="newer" href="[^"]*cursor=([^&"]+)', page)
        if newer is None:
            break
        params = {"limit": "5", "cursor": newer.group(1), "dir": "forward"}
    assert forward == branch[1:]


async def test_recall_fragment_shows_exact_sources(inspected: Inspected) -> None:
    client = inspected.client
    page = (await client.get("/s/demo")).text
    ids = memory_ids(page)
    ledger = await inspected.store.ledger("demo")
    first = ledger.observations[0].observation
    assert first.id in ids
    fragment = (await client.get("/s/demo/recall", params={"id": first.id})).text
    sources = await inspected.store.get_many(first.source_entry_ids)
    for entry_id in first.source_entry_ids:
        assert f"<code>{entry_id}</code>" in fragment
    assert "billing service in Rust" in fragment and len(sources) == len(first.source_entry_ids)
    # A reflection shows its supporting observations.
    reflection = (await client.get("/s/demo/recall", params={"id": SUPERSEDING_REFLECTION})).text
    assert "Supporting observations (2)" in reflection
    # A revoked observation is withheld: its id, never its text.
    revoked = (await client.get("/s/demo/recall", params={"id": REVOKED_OBSERVATION})).text
    assert "[revoked]" in revoked and "555-0100" not in revoked


async def test_charts_fragment_is_svg_of_the_branch(inspected: Inspected) -> None:
    response = await inspected.client.get("/s/demo/charts")
    assert response.status_code == 200
    svg = response.text
    assert svg.count("<svg") == 3
    assert re.search(r'<polyline points="[\d., ]+" class="line transcript"', svg)
    assert re.search(r'<polyline points="[\d., ]+" class="line pool"', svg)
    assert 'class="bar recorded"' in svg and 'class="bar dropped"' in svg


async def test_static_assets_ship_with_the_package(inspected: Inspected) -> None:
    for name, kind in (("inspect.css", "text/css"), ("inspect.js", "text/javascript")):
        response = await inspected.client.get(f"/static/{name}")
        assert response.status_code == 200, name
        assert response.headers["content-type"].startswith(kind)
    page = await inspected.client.get("/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "http" not in policy  # nothing remote: the page works with no network


async def test_session_ids_in_links_are_encoded(inspected: Inspected) -> None:
    page = (await inspected.client.get("/")).text
    assert f'href="/s/{quote("other-session")}"' in page
