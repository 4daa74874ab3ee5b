"""Per-session summaries: timestamps compared as times, and the summary of a whole list."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ..core.timestamps import utc_timestamp
from ..entries import SessionEntry
from .base import SessionSummary

__all__ = ["latest_timestamp", "summarize_entries", "utc_timestamp"]


# Text already in UTC with a fixed width (now_timestamp's shape, or whole seconds): its
# fixed-width form is known without parsing, and text order is time order.
_UTC_SHAPE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3})?Z")
# A whole batch of one of those shapes, joined by newlines (which no value of the shape
# holds, so the match splits exactly at them): the definition the byte templates below
# implement, which the tests compare them with.
_SECONDS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}"
_ALL_ONE_SHAPE = tuple(
    re.compile(f"(?:{_SECONDS}{end}\n)*{_SECONDS}{end}") for end in (r"\.[0-9]{3}Z", "Z")
)


# The same shapes as byte templates, a digit written as 0: ASCII text of the shape, with
# its digits turned to 0, is the template (one translate and compare, not a regex walk).
_DIGITS_AS_ZERO = bytes.maketrans(b"0123456789", b"0000000000")
_TEMPLATES = (b"0000-00-00T00:00:00.000Z\n", b"0000-00-00T00:00:00Z\n")


def _all_one_shape(joined: str, count: int, widen: int) -> bool:
    """``_ALL_ONE_SHAPE[widen].fullmatch(joined)`` for ``count`` values joined by newlines
    (False when a value holds a newline: the caller then parses each value)."""
    if not joined.isascii():
        return False  # the shapes are ASCII ([0-9] is too)
    return joined.encode().translate(_DIGITS_AS_ZERO) == (_TEMPLATES[widen] * count)[:-1]


def latest_timestamp(values: Iterable[object]) -> str | None:
    """The latest of ``values`` as a UTC timestamp (None when none parses).

    Exactly ``max(utc_timestamp(v) ...)``, but an append batch's timestamps are mostly of
    the UTC shapes above: of those only the latest is parsed (to check it names a real
    time), rather than every one.
    """
    listed = list(values)
    texts = [value for value in listed if isinstance(value, str)]
    if texts and len(texts) == len(listed):
        joined = "\n".join(texts)
        for widen in range(len(_ALL_ONE_SHAPE)):
            if _all_one_shape(joined, len(texts), widen):
                # One shape, so text order is time order; a newest that names no time
                # (February 30th) leaves the batch to the loop below.
                newest = max(texts)
                if utc_timestamp(newest) is not None:
                    return f"{newest[:-1]}.000Z" if widen else str(newest)
                break
    latest: str | None = None
    millis: list[str] = []
    seconds: list[str] = []
    for value in listed:
        if isinstance(value, str) and _UTC_SHAPE.fullmatch(value):
            (millis if len(value) == 24 else seconds).append(value)
            continue
        converted = utc_timestamp(value)
        if converted is not None and (latest is None or converted > latest):
            latest = converted
    # Within one shape, text order is time order.
    for shaped, widen in ((millis, False), (seconds, True)):
        shaped.sort(reverse=True)
        for value in shaped:
            fixed = f"{value[:-1]}.000Z" if widen else value
            if latest is not None and fixed <= latest:
                break
            # None for a shape that names no time (February 30th); else exactly ``fixed``.
            if utc_timestamp(value) is not None:
                latest = fixed
                break
    return latest


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
