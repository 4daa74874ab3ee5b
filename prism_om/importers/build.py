"""Shared by every format: deterministic ids, timestamps, progress and entry validation.

Ids. An imported entry's id is ``"i"`` plus 24 hex digits of
``sha256(session_id + NUL + source_key)``, where ``source_key`` names the record in its file
(``"line:12"``, ``"pi:a1b2c3d4"``, ``"id:<native id>"``...). The same file parsed twice into
the same session gives the same ids; imported into another session it gives other ids, so
re-importing never collides with an earlier import (the session id itself is always new).

Timestamps. A record's own time is kept: an ISO 8601 string as written (a naive one is read
as UTC and rewritten with ``Z``), or epoch seconds / milliseconds (a number above 1e11 is
taken as milliseconds) rewritten as ISO UTC. A record without one takes the time of the
record before it, so it sorts where it was written. Before the first dated record, times
are synthetic: the Unix epoch plus one millisecond per record index. They must not depend
on the file's mtime or the clock, or two copies of one file would import differently.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from ..entries import SessionEntry, entry_from_wire
from ..errors import InvalidEntryError
from .source import Source

__all__ = ["EntryFactory", "Progress", "SYNTHETIC_EPOCH", "coerce_timestamp", "derive_entry_id"]

Progress = Callable[[int, int], None]

SYNTHETIC_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)

# Epoch numbers above this are milliseconds: 1e11 seconds is the year 5138.
_MILLISECONDS_ABOVE = 1e11
# Progress is reported at most this many times per parse, whatever the file size.
_PROGRESS_CALLS = 100


def derive_entry_id(session_id: str, source_key: str) -> str:
    """The deterministic id of the record ``source_key`` imported into ``session_id``."""
    digest = hashlib.sha256(f"{session_id}\0{source_key}".encode()).hexdigest()
    return f"i{digest[:24]}"


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def coerce_timestamp(value: object) -> str | None:
    """An ISO 8601 timestamp from a record's time field, None when absent.

    Raises ``ValueError`` with the reason for a value that is present but unusable.
    """
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"timestamp {value!r} is not ISO 8601") from None
        if moment.tzinfo is None:
            return _iso(moment.replace(tzinfo=UTC))
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) > _MILLISECONDS_ABOVE else value
        try:
            return _iso(datetime.fromtimestamp(seconds, UTC))
        except (OverflowError, OSError, ValueError):
            raise ValueError(f"timestamp {value!r} is out of range") from None
    raise ValueError(f"timestamp must be an ISO 8601 string or epoch number, got {value!r}")


class EntryFactory:
    """Builds one import's entries: ids, times, validation, progress."""

    def __init__(self, source: Source, session_id: str, progress: Progress | None) -> None:
        self.source = source
        self.session_id = session_id
        self._progress = progress
        self._total = len(source.records)
        self._step = max(1, -(-self._total // _PROGRESS_CALLS))
        self._done = 0
        self._last_time: str | None = None

    def entry_id(self, source_key: str) -> str:
        """The id of the record ``source_key`` in this import's session."""
        return derive_entry_id(self.session_id, source_key)

    def timestamp(self, value: object, pos: int, index: int) -> str:
        """The entry time for a record: its own, else the previous one, else synthetic."""
        try:
            own = coerce_timestamp(value)
        except ValueError as exc:
            raise self.source.error(pos, str(exc), session_id=self.session_id) from None
        if own is not None:
            self._last_time = own
            return own
        if self._last_time is not None:
            return self._last_time
        return _iso(SYNTHETIC_EPOCH + timedelta(milliseconds=index))

    def make(self, pos: int, wire: dict[str, Any]) -> SessionEntry:
        """Validate a wire dict (``sessionId`` is filled in) into an entry of the import."""
        wire["sessionId"] = self.session_id
        try:
            return entry_from_wire(wire, where="entry")
        except InvalidEntryError as exc:
            raise self.source.error(
                pos, str(exc), entry_id=exc.entry_id, session_id=self.session_id
            ) from None

    def tick(self) -> None:
        """One record done; report progress every ``1/100`` of the file and at the end."""
        self._done += 1
        if self._progress is not None and (
            self._done == self._total or self._done % self._step == 0
        ):
            self._progress(self._done, self._total)
