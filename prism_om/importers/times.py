"""Dating an import's records: their own times, and what fills the gaps.

Own times. A record's time field holds an ISO 8601 string (anything
``datetime.fromisoformat`` reads, spaces around it ignored; a naive one is read as UTC)
or epoch seconds or milliseconds, as a number or a string of 9 or more digits. Every
time is stored in one canonical form, UTC ``YYYY-MM-DDTHH:MM:SS.fffZ`` (what the stores
use for last activity), so times from different zones and notations sort and compare as
the moments they name. Seconds and milliseconds are told apart by magnitude: above 1e11
is milliseconds (1e11 seconds is the year 5138, 1e11 milliseconds March 1973). A present
but unusable value raises ``ImportTimeError`` naming the record's line or index and the
field; an empty string counts as no time.

Plausibility. An epoch number before 2000-01-01 (0, ``1.5``, a negative number, a
millisecond value before 2000) is no real message time but a counter or a placeholder:
it is treated as absent, the record is dated like one without a time, and ``ImportTimes``
counts it (``ignored``) so the note says so. An ISO string is kept whatever its year: a
person wrote that date on purpose.

Gaps. Records without a time of their own are dated ``interval`` seconds apart (default
1), never at the Unix epoch:

* a file with no time at all starts at ``start_time`` when one is given; otherwise its
  last record is dated at the import time and the others count back from it, so nothing
  lies in the future (fallback ``"start-time"`` or ``"import-time"``);
* records before the file's first own time start at ``start_time`` when given (it must not
  be later than that first time), else count back from that first time; a ``start_time``
  given for a file whose first record has its own time is not used (``start_time_unused``);
* records after an own time take that time plus one interval per record since it; when
  the next own time is later, the step shrinks so the run never passes it (when the file's
  own times go backwards, the run keeps the full step) (fallback ``"neighbours"``).

Ids never depend on times; times fall back on the clock only when the file has no own
time and no ``start_time`` is given, and ``ImportTimes`` says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from ..errors import InvalidInputError

__all__ = [
    "DEFAULT_INTERVAL",
    "EARLIEST_EPOCH",
    "ImportTimes",
    "TimeFallback",
    "TimeValue",
    "date_records",
    "import_clock",
    "parse_start_time",
    "present_time",
    "validate_interval",
]

DEFAULT_INTERVAL = 1.0
"""Seconds between records the import dates itself."""

EARLIEST_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""Epoch numbers before this are placeholders, not times: the record counts as undated."""

TimeFallback = Literal["none", "neighbours", "start-time", "import-time"]

TimeValue = tuple[str, object]
"""A record's time field: its name (for messages) and its raw value."""

# Epoch numbers above this are milliseconds: 1e11 seconds is the year 5138.
_MILLISECONDS_ABOVE = 1e11
# Epoch seconds since 1973 have at least 9 digits; 8 digits are an ISO basic date.
_EPOCH_DIGITS = re.compile(r"^-?\d{9,}(\.\d+)?$")


def present_time(value: object) -> bool:
    """Whether a time field's value is there at all: not None, not an empty string."""
    return value is not None and not (isinstance(value, str) and not value.strip())


@dataclass(frozen=True, slots=True)
class ImportTimes:
    """How an import dated its records.

    ``own``: records carrying their own time; ``filled``: records the import dated itself,
    by ``fallback`` (``"none"`` when nothing was filled), ``interval`` seconds apart, of
    which ``from_start`` from the start time, ``from_neighbours`` from the file's own times
    and ``from_import_time`` back from the import time. ``first`` and ``last`` are the
    earliest and latest filled times (None when none was). ``ignored``: epoch values before
    2000 read as no time (``ignored_at`` says where the first one was).
    ``start_time_unused``: a start time was given but the first record has its own time.
    ``unit`` names the records in ``describe()``.
    """

    own: int
    filled: int
    fallback: TimeFallback
    interval: float
    first: str | None = None
    last: str | None = None
    from_start: int = 0
    from_neighbours: int = 0
    from_import_time: int = 0
    ignored: int = 0
    ignored_at: str | None = None
    start_time_unused: bool = False
    unit: str = "messages"

    def describe(self) -> str | None:
        """Sentences saying how missing times were filled; None when nothing needs saying."""
        parts: list[str] = []
        if self.filled:
            missing = f"{self.filled} of {self.own + self.filled} {self.unit} carry no time"
            how = []
            if self.from_start:
                how.append(f"{self.from_start} dated from the start time")
            if self.from_neighbours:
                how.append(
                    f"{self.from_neighbours} from the nearest dated one before them plus "
                    f"{self.interval:g} s each (those before the first dated one count back "
                    "from it)"
                )
            if self.from_import_time:
                how.append(f"{self.from_import_time} dated back from the import time")
            span = f"{self.interval:g} s apart, {self.first} to {self.last}"
            parts.append(f"{missing}: {', '.join(how)}; {span}")
        if self.ignored:
            parts.append(
                f"{self.ignored} epoch time(s) before 2000 (first at {self.ignored_at}) are "
                "no real times and were treated as missing"
            )
        if self.start_time_unused:
            parts.append(
                f"the start time was not used: the first of the {self.unit} has its own time"
            )
        return "; ".join(parts) if parts else None


def import_clock() -> datetime:
    """The import time that a file without any time is dated back from."""
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _from_epoch(value: float, shown: object) -> datetime | None:
    """The moment of an epoch number; None when it lies before ``EARLIEST_EPOCH``."""
    seconds = value / 1000 if abs(value) > _MILLISECONDS_ABOVE else value
    if seconds < EARLIEST_EPOCH.timestamp():
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        digits = len(str(int(abs(value))))
        hint = (
            f"; {digits} digits look like micro- or nanoseconds: give seconds or milliseconds"
            if digits >= 15
            else ""
        )
        raise ValueError(f"{shown!r} is out of range{hint}") from None


_PLACEHOLDER: Literal["placeholder"] = "placeholder"
"""What ``_parse`` returns for an epoch value before 2000: the record counts as undated."""


def _parse(value: object) -> datetime | Literal["placeholder"] | None:
    """A time value as an aware UTC datetime; None when absent, ``_PLACEHOLDER`` when an
    epoch value before 2000."""
    if not present_time(value):
        return None
    if isinstance(value, str):
        text = value.strip()
        if _EPOCH_DIGITS.match(text):
            epoch = _from_epoch(float(text), value)
            return _PLACEHOLDER if epoch is None else epoch
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is not ISO 8601 or epoch seconds") from None
        if moment.tzinfo is None:
            return moment.replace(tzinfo=UTC)
        try:
            return moment.astimezone(UTC)
        except OverflowError:
            raise ValueError(f"{value!r} is out of range in UTC") from None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a time")
        epoch = _from_epoch(value, value)
        return _PLACEHOLDER if epoch is None else epoch
    raise ValueError(f"must be an ISO 8601 string or epoch number, got {value!r}")


def parse_start_time(value: datetime | str | None) -> datetime | None:
    """``start_time`` as an aware datetime (naive is UTC); ``InvalidInputError`` if unusable."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
    raise InvalidInputError(
        f"start time {value!r} is not an ISO 8601 time such as 2024-05-01T09:00:00Z"
    )


def validate_interval(value: float) -> float:
    """``interval`` when it is a finite number of seconds >= 0; else ``InvalidInputError``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"interval must be a finite number of seconds, got {value!r}")
    if value < 0:
        raise InvalidInputError(f"interval must not be negative, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class DatedRecords:
    """Every record's timestamp, by record index, and how they were found."""

    timestamps: list[str]
    report: ImportTimes


BadTime = Callable[[int, str, str], Exception]
"""``(record index, field, reason) -> error``: how a parser reports a bad time value."""


def date_records(
    values: Sequence[TimeValue | None],
    *,
    start_time: datetime | None,
    interval: float,
    now: datetime | None = None,
    bad_time: BadTime,
    where: Callable[[int], str] = lambda index: f"record {index}",
    unit: str = "messages",
) -> DatedRecords:
    """The timestamp of each record from its own time value (None: it has none).

    Raises ``bad_time(...)`` for a present but unusable value, and ``InvalidInputError``
    for a ``start_time`` later than the file's first own time or dates past the years
    1 to 9999 (naming what they were counted from).
    """
    own: list[datetime | None] = []
    ignored: list[int] = []
    for index, value in enumerate(values):
        try:
            parsed = _parse(value[1]) if value is not None else None
        except ValueError as exc:
            assert value is not None
            raise bad_time(index, value[0], f"{value[0]} {exc}") from None
        if parsed == _PLACEHOLDER:
            ignored.append(index)
            parsed = None
        own.append(parsed)
    fill = _Filler(own, start_time, interval, now, where)
    filled = fill.run()
    try:
        timestamps = [_iso(t) if t is not None else _iso(filled[i]) for i, t in enumerate(own)]
    except OverflowError:
        raise InvalidInputError(
            f"the times dated from {fill.blame} fall outside the years 1 to 9999 in UTC"
        ) from None
    moments = sorted(filled.values())
    first_ignored = values[ignored[0]] if ignored else None
    report = ImportTimes(
        own=len(values) - len(filled),
        filled=len(filled),
        fallback=fill.fallback if filled else "none",
        interval=interval,
        first=_iso(moments[0]) if moments else None,
        last=_iso(moments[-1]) if moments else None,
        from_start=fill.counts["start-time"],
        from_neighbours=fill.counts["neighbours"],
        from_import_time=fill.counts["import-time"],
        ignored=len(ignored),
        ignored_at=(
            f"{where(ignored[0])}, {first_ignored[0]} {first_ignored[1]!r}"
            if first_ignored is not None
            else None
        ),
        start_time_unused=start_time is not None and bool(own) and own[0] is not None,
        unit=unit,
    )
    return DatedRecords(timestamps, report)


class _Filler:
    """Dates the records without a time, remembering what it counted from (for errors)."""

    def __init__(
        self,
        own: Sequence[datetime | None],
        start_time: datetime | None,
        interval: float,
        now: datetime | None,
        where: Callable[[int], str],
    ) -> None:
        self.own, self.start_time, self.now, self.where = own, start_time, now, where
        self.interval = interval
        self.step = timedelta(0)
        self.fallback: TimeFallback = "neighbours"
        self.counts: dict[TimeFallback, int] = {"start-time": 0, "neighbours": 0, "import-time": 0}
        self.blame = f"an interval of {interval:g} s"

    def run(self) -> dict[int, datetime]:
        try:
            self.step = timedelta(seconds=self.interval)
            return self._fill()
        except OverflowError:
            raise InvalidInputError(
                f"counting {self.interval:g} s per message from {self.blame} dates messages "
                "outside the years 1 to 9999; choose a smaller interval or fix that time"
            ) from None

    def _fill(self) -> dict[int, datetime]:
        own, step = self.own, self.step
        count = len(own)
        first = next((i for i, moment in enumerate(own) if moment is not None), None)
        filled: dict[int, datetime] = {}
        if first is None:
            if self.start_time is not None:
                self.blame = f"the start time {self.start_time.isoformat()}"
                base, self.fallback = self.start_time, "start-time"
            else:
                self.blame = "the import time"
                base, self.fallback = (
                    (self.now or import_clock()) - step * (count - 1),
                    "import-time",
                )
            self.counts[self.fallback] = count
            return {i: base + step * i for i in range(count)}
        anchor = own[first]
        assert anchor is not None
        if first and self.start_time is not None:
            if self.start_time > anchor:
                raise InvalidInputError(
                    f"start time {_iso(self.start_time)} is later than the first time in the "
                    f"file ({_iso(anchor)}, {self.where(first)}); leave the start time "
                    "out to count back from it"
                )
            self.fallback = "start-time"
            self.blame = f"the start time {self.start_time.isoformat()}"
            gap = min(step, (anchor - self.start_time) / first)
            filled.update({i: self.start_time + gap * i for i in range(first)})
            self.counts["start-time"] += first
        else:
            self.blame = f"the time at {self.where(first)}"
            filled.update({i: anchor - step * (first - i) for i in range(first)})
            self.counts["neighbours"] += first
        after = self._fill_forward(first)
        self.counts["neighbours"] += len(after)
        filled.update(after)
        return filled

    def _fill_forward(self, first: int) -> dict[int, datetime]:
        """Times for the undated records after ``first``: the last own time plus a step each,
        the step narrowed so a run of them never passes a later next own time."""
        own, step = self.own, self.step
        filled: dict[int, datetime] = {}
        index = first
        while index < len(own):
            last = own[index]
            assert last is not None
            end = index + 1
            while end < len(own) and own[end] is None:
                end += 1
            run = end - index - 1
            if run:
                self.blame = f"the time at {self.where(index)}"
                following = own[end] if end < len(own) else None
                gap = step
                if following is not None and following >= last:
                    gap = min(step, (following - last) / (run + 1))
                filled.update({index + k: last + gap * k for k in range(1, run + 1)})
            index = end
        return filled
