"""The inspect page's safety: bad parameters, methods, Host/Origin, escaping, redaction,
and a store left exactly as it was."""

from __future__ import annotations

import hashlib
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
from support.inspect_store import ATTRIBUTE_BREAK, SECRET, XSS

from prism_om.inspect.app import page_redactor

from .conftest import BASE, Inspected

BAD = [
    ("/s/bad%20id", "session id must be"),
    ("/s/demo?leaf=nope", "is not a leaf of session"),
    ("/s/demo?cursor=nope", "is not an entry on the branch"),
    ("/s/demo?limit=0", "limit must be an integer from 1 to 200"),
    ("/s/demo?limit=201", "limit must be an integer from 1 to 200"),
    ("/s/demo?limit=-3", "limit must be an integer"),
    ("/s/demo?limit=abc", "limit must be an integer"),
    ("/s/demo?limit=%EF%BC%93", "limit must be an integer"),  # a full-width digit
    ("/s/demo?dir=sideways", "dir must be one of back, forward"),
    ("/s/demo?offset=-1", "offset must be an integer"),
    ("/s/demo?zzz=1", "unknown query parameter 'zzz'"),
    ("/s/demo?leaf=a&leaf=b", "query parameter 'leaf' is given twice"),
    ("/s/demo?cursor=" + "x" * 300, "cursor must be an entry id of 1-256"),
    ("/s/demo?cursor=a%00b", "cursor must be an entry id"),
    ("/s/demo/timeline?cursor=nope", "is not an entry on the branch"),
    ("/s/demo/timeline?limit=1000", "limit must be an integer from 1 to 200"),
    ("/s/demo/recall", "id is required"),
    ("/s/demo/recall?id=XYZ", "id must be a memory id of 12 lowercase hex"),
    ("/s/demo/recall?id=000000000000", "is unknown on this branch"),
    ("/s/demo/recall?id=abcdef012345&offset=x", "offset must be an integer"),
    ("/s/demo/charts?leaf=%3Cscript%3E", "is not a leaf of session"),
    ("/?q=" + "q" * 201, "q must be at most 200 characters"),
    ("/?offset=1e3", "offset must be an integer"),
]


@pytest.mark.parametrize(("url", "reason"), BAD)
async def test_a_bad_parameter_is_a_400_page_with_the_reason(
    inspected: Inspected, url: str, reason: str
) -> None:
    response = await inspected.client.get(url)
    assert response.status_code == 400, response.text
    shown = re.search(r'<p class="reason" id="reason">(.*?)</p>', response.text, re.S)
    assert shown is not None
    assert reason in html.unescape(shown.group(1))
    assert "Traceback" not in response.text


async def test_a_cursor_on_another_branch_is_refused(inspected: Inspected) -> None:
    filled = inspected.filled
    response = await inspected.client.get("/s/demo", params={"cursor": filled.fork_leaf})
    assert response.status_code == 400
    assert "is not an entry on the branch" in response.text


async def test_an_unknown_session_or_path_is_404(inspected: Inspected) -> None:
    for url in ("/s/no-such-session", "/s/no-such-session/charts", "/nothing/here"):
        response = await inspected.client.get(url)
        assert response.status_code == 404, url
        assert "Traceback" not in response.text


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"])
async def test_every_method_but_get_and_head_is_405(inspected: Inspected, method: str) -> None:
    for url in ("/", "/s/demo", "/s/demo/recall?id=abcdef012345", "/static/inspect.css"):
        response = await inspected.client.request(method, url)
        assert response.status_code == 405, (method, url)
        assert response.headers["allow"] == "GET, HEAD"  # HEAD: test_assets_and_head.py


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "evil.example:8787"}, 421),
        ({"host": "127.0.0.1:9999"}, 421),
        ({"host": "127.0.0.1.nip.io:8787"}, 421),
        ({"origin": "http://evil.example"}, 403),
        ({"origin": "http://127.0.0.1:9999"}, 403),
        ({"origin": "null"}, 403),
        ({"host": "localhost:8787", "origin": "http://localhost:8787"}, 200),
        ({"origin": BASE}, 200),
    ],
)
async def test_host_and_origin_are_checked(
    inspected: Inspected, headers: dict[str, str], status: int
) -> None:
    for url in ("/", "/s/demo/recall?id=abcdef012345", "/static/inspect.js"):
        response = await inspected.client.get(url, headers=headers)
        assert response.status_code == status, (url, headers)
        if status != 200:
            assert "demo" not in response.text


async def every_page(inspected: Inspected) -> dict[str, str]:
    """Every route's answer, fragments and error pages included, by URL."""
    client, filled = inspected.client, inspected.filled
    urls = ["/", "/?q=demo", "/s/demo", f"/s/demo?leaf={filled.fork_leaf}"]
    urls += ["/s/demo/charts", "/s/demo/timeline?limit=200", "/s/other-session"]
    page = (await client.get("/s/demo")).text
    for memory_id in dict.fromkeys(re.findall(r"/recall\?id=([0-9a-f]{12})", page)):
        urls.append(f"/s/demo/recall?id={memory_id}")
    # Error pages that quote what they were given.
    urls += [f"/s/demo?cursor={quote(SECRET, safe='')}", f"/?q={quote(SECRET, safe='')}"]
    urls += [f"/s/demo?leaf={quote(XSS, safe='')}", f"/s/demo?cursor={quote(XSS, safe='')}"]
    return {url: (await client.get(url)).text for url in urls}


async def test_untrusted_text_shows_as_text(inspected: Inspected) -> None:
    pages = await every_page(inspected)
    shown_somewhere = False
    for url, body in pages.items():
        tags = Tags()
        tags.feed(body)
        # At most our one script, loaded from our own assets; no img, no event handler.
        assert [a for t, a in tags.seen if t == "script"] in (
            [],
            [{"src": "/static/inspect.js", "defer": None}],
        ), url
        assert not [t for t, _ in tags.seen if t in ("img", "iframe", "object")], url
        handlers = [(t, a) for t, a in tags.seen if any(n.startswith("on") for n in a)]
        assert not handlers, (url, handlers)
        shown_somewhere |= "&lt;script&gt;alert(&#39;pwned&#39;)&lt;/script&gt;" in body
    assert shown_somewhere
    assert any("onmouseover=&#34;alert(1)&#34;" in body for body in pages.values())
    assert ATTRIBUTE_BREAK not in "".join(pages.values())


class Tags(HTMLParser):
    """Every start tag of a page with its attributes, as a browser would parse them."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.seen.append((tag, dict(attrs)))


def secret_forms(secret: str) -> set[str]:
    forms = {
        secret,
        html.escape(secret),
        html.escape(secret, quote=False),
        quote(secret, safe=""),
        quote(secret),
        quote_plus(secret),
        json.dumps(secret)[1:-1],
        json.dumps(json.dumps(secret))[1:-1],
        repr(secret)[1:-1],
    }
    return forms


def shown_forms(secret: str) -> set[str]:
    """Each form as a page body would carry it: as is, or escaped once more by the page."""
    forms = secret_forms(secret)
    return forms | {html.escape(form) for form in forms}


async def test_secrets_are_redacted_from_every_page_and_fragment(inspected: Inspected) -> None:
    pages = await every_page(inspected)
    for url, body in pages.items():
        for form in shown_forms(SECRET):
            assert form not in body, (url, form)
    assert any("[REDACTED]" in body for body in pages.values())


def test_the_page_redactor_matches_the_forms_a_page_shows() -> None:
    red = page_redactor(["a b&c<'\"/"])
    for form in secret_forms("a b&c<'\"/"):
        shown = red.text(f"x{form}y")
        assert form not in shown and "[REDACTED]" in shown, form


def snapshot(root: Path) -> dict[str, str]:
    return {
        str(path.relative_to(root)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


async def test_no_route_writes_to_the_store(inspected: Inspected) -> None:
    before = snapshot(inspected.root)
    summaries = await inspected.store.session_summaries()
    await every_page(inspected)
    for method in ("POST", "PUT", "DELETE"):
        await inspected.client.request(method, "/s/demo")
    assert snapshot(inspected.root) == before
    assert await inspected.store.session_summaries() == summaries
