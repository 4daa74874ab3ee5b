"""Issue 28 item 2: the inspect page's Content-Length is the length of the body it sends.

The guard redacts each whole response once more; whenever that final pass changes a body
(a secret inside a session id, a scope label, or an error that quotes the secret) the
declared length must be the redacted body's, or the client reads a truncated body or
waits for bytes that never come. Served for real (``prism-om inspect`` over HTTP) so the
server's own framing is what is checked; on every adapter the command can serve.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support.inspect_server import serving
from support.inspect_store import fill_store

from prism_om.session import Session
from prism_om.stores import open_store

# Shorter and longer than the "[REDACTED]" marker, so the body both shrinks and grows.
IN_SESSION_ID = "prod-7731"
IN_SCOPE_LABEL = "ticket-QX9-longer-than-the-marker"
SESSION = f"acme-{IN_SESSION_ID}"
SECRETS = f"{IN_SESSION_ID}\n{IN_SCOPE_LABEL}"


async def _fill(url: str) -> None:
    async with await open_store(url, create=True) as store:
        await fill_store(store, session_id=SESSION)
        await Session(store, SESSION).append_custom(
            {
                "type": "om.scope.opened",
                "id": "task-1",
                "kind": "task",
                "label": f"work on {IN_SCOPE_LABEL}",
            }
        )


@pytest.fixture(params=["sqlite", "jsonl", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgres":
        url: str = request.getfixturevalue("postgres_url")
        return url
    if request.param == "jsonl":
        return f"jsonl:{tmp_path / 'store'}"
    return f"sqlite:{tmp_path / 'store.db'}"


# Each path, its status, and the tag its whole body ends with (a fragment is a div).
PAGES = [
    ("/", 200, "</html>"),
    (f"/s/{SESSION}", 200, "</html>"),
    (f"/s/{SESSION}/timeline?limit=200", 200, "</div>"),
    (f"/s/{SESSION}/charts", 200, "</div>"),
    (f"/s/nosuch-{IN_SESSION_ID}", 404, "</html>"),  # the error quotes the session id
    (f"/s/{SESSION}?leaf=x-{IN_SESSION_ID}", 400, "</html>"),  # ... and the leaf
    (f"/no/page/{IN_SCOPE_LABEL}", 404, "</html>"),
]


async def test_every_redacted_body_arrives_whole(store_url: str, tmp_path: Path) -> None:
    await _fill(store_url)
    with serving(store_url, cwd=tmp_path, secrets=SECRETS) as (base, _):
        # A body cut short ends the read with an error; one that never ends hits the
        # timeout: either fails the test, neither is a timing assertion.
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            for path, status, last_tag in PAGES:
                response = await client.get(path)
                assert response.status_code == status, (path, response.text[-500:])
                body = response.content
                assert int(response.headers["content-length"]) == len(body), path
                text = body.decode("utf-8")  # strict: a body cut inside a character fails
                assert text.rstrip().endswith(last_tag), (path, text[-300:])
                assert IN_SESSION_ID not in text and IN_SCOPE_LABEL not in text, path
                # The final pass did change the body (the charts name no session).
                assert "[REDACTED]" in text or path.endswith("/charts"), path
            # HEAD declares the length a GET sends.
            head = await client.head(f"/s/{SESSION}")
            get = await client.get(f"/s/{SESSION}")
            assert int(head.headers["content-length"]) == len(get.content)
        # The server still answers after all of it.
        async with httpx.AsyncClient(base_url=base, timeout=60) as client:
            assert (await client.get("/")).status_code == 200
