"""The inspect page as an ASGI app: routes, templates, and the guard around every response.

The guard, outermost, answers before any route runs: a method other than ``GET`` or
``HEAD`` (answered as ``GET`` without the body) is 405;
a ``Host`` or ``Origin`` other than this server's own address is refused with the MCP
server's own check (``prism_om.reports.http_security`` and the SDK's transport-security
validation), so a page that rebinds its domain name to 127.0.0.1 cannot read the memory
through the user's browser. Then every text response (pages, fragments, errors) passes the
secrets redaction once more as a whole, in each form the page could show a secret in:
as written, HTML-escaped, URL-encoded, and JSON-escaped (``Redactor`` adds those), on top
of the redaction the views already apply to each text before they clip it. The shipped
assets under ``/static`` are package files, never store text: they are served as they are
(a secret such as ``const`` must not break the page's script).

A store that cannot be read answers with this page's own error page naming the reason
(500 for damage, with the ``prism-om check`` hint; 503 for a busy store), logged as one
redacted line on stderr; anything unexpected is a 500 page without details, its
traceback logged redacted.
"""

from __future__ import annotations

import html
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final
from urllib.parse import quote, quote_plus

from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..core.redaction import Redactor, redactor
from ..errors import (
    CorruptStoreError,
    InvalidInputError,
    SessionNotFoundError,
    StoreBusyError,
    StoreError,
    StoreRuleError,
)
from ..stores import SessionStore
from .routes import ROUTES
from .views import Inspector

__all__ = ["DEFAULT_PORT", "create_inspect_app", "page_redactor"]

DEFAULT_PORT: Final = 8787
_HERE = Path(__file__).parent
_SECURITY_HEADERS: Final = {
    # Only our own assets: no inline script, no remote anything, no framing.
    "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def page_redactor(secrets: Iterable[str] | Redactor | None) -> Redactor:
    """A redactor matching each secret as written, HTML-escaped and URL-encoded."""
    base = redactor(secrets)
    forms: set[str] = set()
    for secret in base.secrets:
        forms.update(
            {
                secret,
                html.escape(secret),
                html.escape(secret, quote=False),
                str(_markup_escape(secret)),
                quote(secret, safe=""),
                quote(secret),
                quote_plus(secret),
            }
        )
    return Redactor(forms, marker=base.marker)


def _markup_escape(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def create_inspect_app(
    store: SessionStore,
    *,
    port: int = DEFAULT_PORT,
    host: str = "127.0.0.1",
    secrets: Iterable[str] | Redactor | None = None,
    tombstone_scopes: Iterable[str] | None = None,
    recent_messages: int = 8,
) -> ASGIApp:
    """The read-only inspect page over ``store`` (which the caller opens and closes).

    ``port`` and ``host`` are where it is served: only requests naming that address (or
    ``localhost`` on that port) in ``Host``/``Origin`` are answered. ``secrets`` are
    redacted from every response; ``tombstone_scopes`` limits revocation to those scopes
    (default: all); ``recent_messages`` is the agent's ``context.recentMessages``.
    """
    # Text from the store is redacted in every form the page could show it in, before
    # it is clipped; the guard redacts each whole response once more.
    red = page_redactor(secrets)
    inspector = Inspector(store, red, list(tombstone_scopes or ()) or None, recent_messages)
    env = Environment(
        loader=FileSystemLoader(_HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
    )

    def render(template: str, **context: Any) -> str:
        return env.get_template(template).render(store_url=store.url, **context)

    async def refused(request: Request, exc: Exception) -> Response:
        if isinstance(exc, SessionNotFoundError):
            return _error(render, 404, "Not found", str(exc))
        if isinstance(exc, InvalidInputError | StoreRuleError):
            return _error(render, 400, "Bad request", str(exc))
        if isinstance(exc, StoreError):
            return _store_error(render, red, request, exc, store.url)
        return _error(render, 500, "Server error", f"unexpected {type(exc).__name__}")

    app = Starlette(
        routes=[
            *ROUTES,
            Mount("/static", app=StaticFiles(directory=_HERE / "static"), name="static"),
        ],
        exception_handlers={
            InvalidInputError: refused,
            StoreRuleError: refused,
            StoreError: refused,
            # Starlette's outermost middleware answers anything else with this (instead of
            # a bare text/plain 500), then re-raises it to the guard, which logs it.
            Exception: refused,
            404: _not_found(render),
            405: _not_allowed(render),
        },
    )
    app.state.inspector = inspector
    app.state.render = render
    # Exception: caught by Starlette's outermost middleware, which then re-raises it;
    # our guard turns whatever escapes into a 500 page without details.
    return _Guard(app, port=port, host=host, redactor=red, render=render)


def _error(render: Any, status: int, heading: str, reason: str) -> HTMLResponse:
    page = render("error.html", title=heading, status=status, heading=heading, reason=reason)
    return HTMLResponse(page, status_code=status)


_REPAIR_HINT: Final = (
    "run 'prism-om check --db {url}' to see the damage; 'prism-om check --repair' cuts a "
    "damaged session back to its last valid entry"
)


def _store_error(
    render: Any, red: Redactor, request: Request, exc: StoreError, url: str
) -> Response:
    """A store that cannot answer: its reason on the page and as one line on stderr."""
    reason = " ".join(str(exc).split())
    if isinstance(exc, StoreBusyError):
        status, heading = 503, "Store busy"
        reason += " (try again in a moment)"
    else:
        status, heading = 500, "Store error"
        if isinstance(exc, CorruptStoreError) and "check --repair" not in reason:
            reason += f" ({_REPAIR_HINT.format(url=url)})"
    reason = red.text(reason)
    _report(red, f"{request.method} {request.url.path}: {status} {type(exc).__name__}: {reason}")
    response = _error(render, status, heading, reason)
    if status == 503:
        response.headers["retry-after"] = "5"
    return response


def _report(red: Redactor, line: str) -> None:
    """One redacted line on stderr, as the CLI's own lines are."""
    sys.stderr.write(red.text(f"prism-om: inspect: {line}") + "\n")
    sys.stderr.flush()


def _not_found(render: Any) -> Any:
    async def handle(request: Request, exc: Exception) -> Response:
        return _error(render, 404, "Not found", f"no page at {request.url.path}")

    return handle


def _not_allowed(render: Any) -> Any:
    async def handle(request: Request, exc: Exception) -> Response:
        response = _error(render, 405, "Method not allowed", "this page is read-only: GET only")
        response.headers["allow"] = "GET, HEAD"
        return response

    return handle


class _Guard:
    """Method, Host and Origin checks before the app; redaction and headers after it."""

    def __init__(
        self, app: ASGIApp, *, port: int, host: str, redactor: Redactor, render: Any
    ) -> None:
        from mcp.server.transport_security import TransportSecurityMiddleware

        from ..reports.http_security import http_security

        self.app = app
        self.redactor = redactor
        self.render = render
        self.security = TransportSecurityMiddleware(http_security(port, host))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        refused = await self.security.validate_request(request)
        if refused is None and request.method not in ("GET", "HEAD"):
            refused = _error(self.render, 405, "Method not allowed", "read-only: GET only")
            refused.headers["allow"] = "GET, HEAD"
        # Shipped assets hold no store text; redacting them would only break them.
        asset = scope.get("path", "").startswith("/static/")
        outgoing = self._redacting(send, redact=not asset, head=request.method == "HEAD")
        if refused is not None:
            await refused(scope, receive, outgoing)
            return
        try:
            await self.app(scope, receive, outgoing)
        except Exception as exc:
            # Logged here, redacted, instead of by the server, whose traceback would quote
            # the store's text (an entry field in an error message) as it is.
            trace = "".join(traceback.format_exception(exc)).rstrip()
            _report(self.redactor, f"{request.method} {request.url.path}: {trace}")
            if getattr(outgoing, "started", False):
                return
            page = _error(self.render, 500, "Server error", f"unexpected {type(exc).__name__}")
            await page(scope, receive, outgoing)

    def _redacting(self, send: Send, *, redact: bool = True, head: bool = False) -> Any:
        """``send`` with each text body redacted whole (bodies are small: pages are capped)."""
        red = self.redactor
        state: dict[str, Any] = {"start": None, "chunks": []}

        async def outgoing(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["start"] = message
                return
            if message["type"] != "http.response.body":
                await send(message)
                return
            state["chunks"].append(message.get("body", b""))
            if message.get("more_body", False):
                return
            start = state["start"]
            body = b"".join(state["chunks"])
            headers = [
                (k, v)
                for k, v in start.get("headers", [])
                if k.lower() not in (b"content-length", *(h.encode() for h in _SECURITY_HEADERS))
            ]
            content_type = dict(headers).get(b"content-type", b"").decode("latin-1")
            if redact and red and content_type.startswith(("text/", "image/svg")):
                body = red.text(body.decode("utf-8", "replace")).encode("utf-8")
            # Measured on the body as sent: the redaction above may shrink or grow it.
            length = str(len(body)).encode()
            if head and not body:  # a file response already left its body out
                length = dict(start.get("headers", [])).get(b"content-length", length)
            headers += [(k.encode(), v.encode()) for k, v in _SECURITY_HEADERS.items()]
            headers.append((b"content-length", length))
            outgoing.started = True  # type: ignore[attr-defined]
            await send({**start, "headers": headers})
            # HEAD: the length a GET would send, no body.
            await send({"type": "http.response.body", "body": b"" if head else body})

        outgoing.started = False  # type: ignore[attr-defined]
        return outgoing
