"""Pages and fragments: the sessions list, a session, its recall and chart fragments.

Each handler checks its path and query parameters first (``params.Query``), then reads.
What a handler raises becomes a page in ``app.py``: a bad parameter 400, an unknown
session 404, anything else 500 without details.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from ...errors import InvalidInputError
from ...stores.search import SEARCH_QUERY_MAX_CHARS
from ...tokens import get_estimator
from ..charts import branch_charts
from ..params import (
    TIMELINE_LIMIT_DEFAULT,
    TIMELINE_LIMIT_MAX,
    InspectParamError,
    Query,
    session_id_param,
)
from ..views import Inspector

__all__ = ["ROUTES"]

Handler = Callable[[Request], Awaitable[Response]]


def _inspector(request: Request) -> Inspector:
    inspector: Inspector = request.app.state.inspector
    return inspector


def _render(request: Request, template: str, **context: Any) -> HTMLResponse:
    render: Callable[..., str] = request.app.state.render
    return HTMLResponse(render(template, **context))


def _query(request: Request, *allowed: str) -> Query:
    return Query(request.query_params.multi_items(), allowed)


async def sessions_page(request: Request) -> Response:
    query = _query(request, "q", "offset")
    needle = query.text("q")
    offset = query.count("offset", 0, 0)
    page = await _inspector(request).sessions(needle, offset)
    return _render(request, "sessions.html", title="Sessions", page=page)


async def session_page(request: Request) -> Response:
    sid = session_id_param(request.path_params["session_id"])
    query = _query(request, "leaf", "cursor", "dir", "limit", "offset")
    leaf_param = query.entry_id("leaf")
    cursor = query.entry_id("cursor")
    direction = query.choice("dir", ("back", "forward"))
    limit = query.count("limit", TIMELINE_LIMIT_DEFAULT, 1, TIMELINE_LIMIT_MAX)
    offset = query.count("offset", 0, 0)
    inspector = _inspector(request)
    current, leaf, leaves = await inspector.chosen_leaf(sid, leaf_param)
    return _render(
        request,
        "session.html",
        title=sid,
        sid=sid,
        leaf=leaf,
        branches=await inspector.branches(sid, current, leaf, leaves),
        leaves_total=len({current, *leaves}),
        memory=await inspector.memory(sid, leaf, offset),
        timeline=await inspector.timeline(sid, leaf, cursor, direction, limit),
    )


async def timeline_fragment(request: Request) -> Response:
    sid = session_id_param(request.path_params["session_id"])
    query = _query(request, "leaf", "cursor", "dir", "limit")
    leaf_param = query.entry_id("leaf")
    cursor = query.entry_id("cursor")
    direction = query.choice("dir", ("back", "forward"))
    limit = query.count("limit", TIMELINE_LIMIT_DEFAULT, 1, TIMELINE_LIMIT_MAX)
    inspector = _inspector(request)
    _, leaf, _ = await inspector.chosen_leaf(sid, leaf_param)
    timeline = await inspector.timeline(sid, leaf, cursor, direction, limit)
    return _render(request, "_timeline.html", sid=sid, leaf=leaf, timeline=timeline)


async def recall_fragment(request: Request) -> Response:
    sid = session_id_param(request.path_params["session_id"])
    query = _query(request, "id", "leaf", "offset")
    memory_id = query.memory_id("id")
    if memory_id is None:
        raise InspectParamError("id is required: the 12-hex id of an observation or reflection")
    leaf_param = query.entry_id("leaf")
    offset = query.count("offset", 0, 0)
    inspector = _inspector(request)
    _, leaf, _ = await inspector.chosen_leaf(sid, leaf_param)
    found = await inspector.recall(sid, leaf, memory_id, offset)
    if not found["found"] and found["reason"] != "revoked":
        raise InspectParamError(
            f"memory id {memory_id!r} is unknown on this branch of {sid!r}",
            memory_id=memory_id,
            session_id=sid,
        )
    return _render(request, "_recall.html", sid=sid, leaf=leaf, r=found)


async def search_page(request: Request) -> Response:
    """The search box's hits on the chosen branch; memory hits open their recall in place,
    message hits link to the timeline at that message."""
    sid = session_id_param(request.path_params["session_id"])
    query = _query(request, "q", "leaf", "kind")
    needle = query.text("q", SEARCH_QUERY_MAX_CHARS)
    kind = query.choice("kind", ("", "observation", "reflection", "message"))
    leaf_param = query.entry_id("leaf")
    inspector = _inspector(request)
    _, leaf, _ = await inspector.chosen_leaf(sid, leaf_param)
    hits: list[dict[str, Any]] = []
    if needle and needle.strip():
        try:
            hits = await inspector.search(sid, leaf, needle, [kind] if kind else None)
        except InvalidInputError as exc:
            raise InspectParamError(str(exc)) from None
    return _render(
        request,
        "search.html",
        title=f"search {sid}",
        sid=sid,
        leaf=leaf,
        q=needle or "",
        kind=kind or "",
        hits=hits,
    )


async def charts_fragment(request: Request) -> Response:
    sid = session_id_param(request.path_params["session_id"])
    query = _query(request, "leaf")
    leaf_param = query.entry_id("leaf")
    inspector = _inspector(request)
    _, leaf, _ = await inspector.chosen_leaf(sid, leaf_param)
    branch = await inspector.store.entries(sid, leaf)
    tokens = await inspector.store.branch_tokens(sid, leaf)
    charts = branch_charts(branch, tokens, get_estimator())
    return _render(request, "_charts.html", c=charts)


ROUTES = [
    Route("/", sessions_page, methods=["GET"]),
    Route("/s/{session_id}", session_page, methods=["GET"]),
    Route("/s/{session_id}/timeline", timeline_fragment, methods=["GET"]),
    Route("/s/{session_id}/recall", recall_fragment, methods=["GET"]),
    Route("/s/{session_id}/charts", charts_fragment, methods=["GET"]),
    Route("/s/{session_id}/search", search_page, methods=["GET"]),
]
