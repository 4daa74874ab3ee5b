"""One row per session, as ``prism-om sessions``, the inspector and MCP list them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.timestamps import utc_timestamp
from ..stores import SessionStore, SessionSummary

__all__ = ["damaged_sessions", "session_rows"]


async def session_rows(store: SessionStore) -> list[dict[str, Any]]:
    """One row per session, from the store's kept summaries (``session_summaries``).

    Last activity is compared as a time and shown in UTC, whatever format the timestamps
    were in.
    """
    summaries: Sequence[SessionSummary] = await store.session_summaries()
    return [
        {
            "session": s.session_id,
            "entries": s.entries,
            "messages": s.messages,
            "leaves": s.leaves,
            "leaf": await store.leaf(s.session_id),
            "lastActivity": utc_timestamp(s.last_activity),
        }
        for s in summaries
    ]


async def damaged_sessions(store: SessionStore) -> dict[str, Exception]:
    return dict(await store.damaged_sessions())
