"""Shared by every format: deterministic ids, timestamps, progress and entry validation.

Validation. Each entry is built from its wire form and checked against the tombstone rule
(``prism_om.core.tombstones``): an import into a ``tombstones.<scope>`` session takes only
well-formed tombstone records, and a tombstone record only there, refused at its line.

Ids. An imported entry's id is ``"i"`` plus 24 hex digits of
``sha256(session_id + NUL + source_key)``, where ``source_key`` names the record in its file
(``"line:12"``, ``"pi:a1b2c3d4"``, ``"id:<native id>"``...). The same file parsed twice into
the same session gives the same ids; imported into another session it gives other ids, so
re-importing never collides with an earlier import (the session id itself is always new).

Timestamps. ``times`` explains them: a record's own time is kept, and the records
without one are dated ``interval`` seconds apart around the times that are known, from
``start_time``, or back from the import time, never at the Unix epoch. Each parser hands
over every record's time value first (``date``), so a gap at the start of a file can count
back from the first time written after it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..core.tombstones import check_tombstone_entry
from ..entries import SessionEntry, entry_from_wire
from ..errors import ImportTimeError, InvalidEntryError
from .source import Source
from .times import (
    DEFAULT_INTERVAL,
    ImportTimes,
    TimeValue,
    date_records,
)

__all__ = [
    "EntryFactory",
    "Progress",
    "TimeOptions",
    "derive_entry_id",
]

Progress = Callable[[int, int], None]
# Progress is reported at most this many times per parse, whatever the file size.
_PROGRESS_CALLS = 100


def derive_entry_id(session_id: str, source_key: str) -> str:
    """The deterministic id of the record ``source_key`` imported into ``session_id``."""
    digest = hashlib.sha256(f"{session_id}\0{source_key}".encode()).hexdigest()
    return f"i{digest[:24]}"


@dataclass(frozen=True, slots=True)
class TimeOptions:
    """How to date records without a time: from ``start_time``, ``interval`` s apart."""

    start_time: datetime | None = None
    interval: float = DEFAULT_INTERVAL


class EntryFactory:
    """Builds one import's entries: ids, times, validation, progress."""

    def __init__(
        self,
        source: Source,
        session_id: str,
        progress: Progress | None,
        times: TimeOptions | None = None,
    ) -> None:
        self.source = source
        self.session_id = session_id
        self._progress = progress
        self._total = len(source.records)
        self._step = max(1, -(-self._total // _PROGRESS_CALLS))
        self._done = 0
        self._options = times or TimeOptions()
        self._timestamps: list[str] = []
        self.times: ImportTimes | None = None
        """How the records were dated; set by ``date``."""
        self.positions: dict[str, int] = {}
        """Each entry's record position, by entry id (what an append error names)."""

    def entry_id(self, source_key: str) -> str:
        """The id of the record ``source_key`` in this import's session."""
        return derive_entry_id(self.session_id, source_key)

    def date(self, values: Sequence[TimeValue | None], unit: str = "messages") -> None:
        """Date every record from its time value (by record index; None: it has none).

        A bad value raises ``ImportTimeError`` at its record, naming the field.
        """
        records = self.source.records
        jsonl = self.source.layout == "jsonl"

        def bad_time(index: int, field: str, reason: str) -> ImportTimeError:
            pos = records[index].pos
            return ImportTimeError(
                self.source.name,
                reason,
                field=field,
                line=pos if jsonl else None,
                index=None if jsonl else pos,
                session_id=self.session_id,
            )

        dated = date_records(
            values,
            start_time=self._options.start_time,
            interval=self._options.interval,
            bad_time=bad_time,
            where=lambda index: self.source.where(records[index].pos),
            unit=unit,
        )
        self._timestamps = dated.timestamps
        self.times = dated.report

    def timestamp(self, index: int) -> str:
        """The time of record ``index`` (``date`` must have run)."""
        return self._timestamps[index]

    def make(self, pos: int, wire: dict[str, Any]) -> SessionEntry:
        """Validate a wire dict (``sessionId`` is filled in) into an entry of the import."""
        wire["sessionId"] = self.session_id
        try:
            entry = entry_from_wire(wire, where="entry")
            # The store refuses it too; here the error names the file's line.
            check_tombstone_entry(entry)
            self.positions[entry.id] = pos
            return entry
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
