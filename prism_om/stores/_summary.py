"""Per-session summaries: timestamps compared as times, and the summary of a whole list."""

from __future__ import annotations

from collections.abc import Iterable

from ..core.timestamps import utc_timestamp
from ..entries import SessionEntry
from .base import SessionSummary

__all__ = ["latest_timestamp", "summarize_entries", "utc_timestamp"]


def latest_timestamp(values: Iterable[object]) -> str | None:
    """The latest of ``values`` as a UTC timestamp (None when none parses)."""
    return max(filter(None, map(utc_timestamp, values)), default=None)


def summarize_entries(
    session_id: str, entries: Iterable[SessionEntry], leaves: int
) -> SessionSummary:
    """The summary of a session from all its entries: for stores that keep none."""
    listed = list(entries)
    return SessionSummary(
        session_id=session_id,
        entries=len(listed),
        messages=sum(1 for e in listed if e.kind == "message"),
        leaves=leaves,
        last_activity=latest_timestamp(e.timestamp for e in listed),
    )
