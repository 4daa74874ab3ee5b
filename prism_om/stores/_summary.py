"""Per-session summaries: timestamps compared as times, and the summary of a whole list."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from ..entries import SessionEntry
from .base import SessionSummary

__all__ = ["latest_timestamp", "summarize_entries", "utc_timestamp"]


def utc_timestamp(value: object) -> str | None:
    """``value`` as a fixed-width UTC ISO 8601 string, or None when it is no timestamp.

    The fixed width makes these strings sort as the times they name, so a store can keep
    and compare them as text: ``20260318 101010`` and ``2026-03-22T09:30:00+02:00`` both
    become ``YYYY-MM-DDTHH:MM:SS.fffZ``. A timestamp without an offset is taken as UTC.
    """
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is not None:
            parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):
        return None
    return parsed.isoformat(timespec="milliseconds") + "Z"


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
