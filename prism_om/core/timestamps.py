"""Entry timestamps as fixed-width UTC text, which sorts as the times it names."""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["utc_timestamp"]


def utc_timestamp(value: object) -> str | None:
    """``value`` as a fixed-width UTC ISO 8601 string, or None when it is no timestamp.

    The fixed width makes these strings sort as the times they name, so a store can keep
    and compare them as text: ``20260318 101010`` and ``2026-03-22T09:30:00+02:00`` both
    become ``YYYY-MM-DDTHH:MM:SS.fffZ``. A timestamp without an offset is taken as UTC.
    An adapter computes ``SessionSummary.last_activity`` as the greatest of its
    entries' ``utc_timestamp(entry.timestamp)``.
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
