"""Dating an import's records: their own times, and what fills the gaps.

Own times. A record's time field holds an ISO 8601 string (kept as written; a naive one is
read as UTC and rewritten with ``Z``) or epoch seconds or milliseconds, as a number or a
string of 9 or more digits, rewritten as ISO UTC. Seconds and milliseconds are told apart
by magnitude: above 1e11 is milliseconds (1e11 seconds is the year 5138, 1e11
milliseconds March 1973), so a millisecond time from before March 1973 is misread, and no
real transcript has one. A present but unusable value raises ``ImportTimeError`` naming
the record's line or index and the field.

Gaps. Records without a time of their own are dated ``interval`` seconds apart (default
1), never at the Unix epoch:

* a file with no time at all starts at ``start_time`` when one is given; otherwise its
  last record is dated at the import time and the others count back from it, so nothing
  lies in the future (fallback ``"start-time"`` or ``"import-time"``);
* records before the file's first own time start at ``start_time`` when given (it must not
  be later than that first time), else count back from that first time;
* records after an own time take that time plus one interval per record since it, never
  going past the next own time (the step shrinks to fit when the gap is narrow), so filled
  times never go backwards (fallback ``"neighbours"`` when no ``start_time`` was used).

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
    "ImportTimes",
    "TimeFallback",
    "TimeValue",
    "date_records",
    "import_clock",
    "parse_start_time",
    "validate_interval",
]

DEFAULT_INTERVAL = 1.0
"""Seconds between records the import dates itself."""

TimeFallback = Literal["none", "neighbours", "start-time", "import-time"]

TimeValue = tuple[str, object]
"""A record's time field: its name (for messages) and its raw value."""

# Epoch numbers above this are milliseconds: 1e11 seconds is the year 5138.
_MILLISECONDS_ABOVE = 1e11
# Epoch seconds since 1973 have at least 9 digits; 8 digits are an ISO basic date.
_EPOCH_DIGITS = re.compile(r"^\d{9,}(\.\d+)?$")


@dataclass(frozen=True, slots=True)
class ImportTimes:
    """How an import dated its records.

    ``own``: records carrying their own time; ``filled``: records the import dated itself,
    by ``fallback`` (``"none"`` when nothing was filled), ``interval`` seconds apart.
    ``first`` and ``last`` are the first and last filled times (None when none was).
    """

    own: int
    filled: int
    fallback: TimeFallback
    interval: float
    first: str | None = None
    last: str | None = None

    def describe(self) -> str | None:
        """One sentence saying how missing times were filled; None when none was missing."""
        if self.fallback == "none":
            return None
        missing = f"{self.filled} of {self.own + self.filled} messages carry no time"
        span = f"{self.interval:g} s apart, {self.first} to {self.last}"
        if self.fallback == "import-time":
            return f"{missing}; dated back from the import time, {span}"
        if self.fallback == "start-time":
            return f"{missing}; dated from the start time, {span}"
        return (
            f"{missing}; each took the time of the nearest dated message before it plus "
            f"{self.interval:g} s per message (those before the first dated message count "
            "back from it)"
        )


def import_clock() -> datetime:
    """The import time that a file without any time is dated back from."""
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    utc = moment.astimezone(UTC)
    return utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _from_epoch(value: float, shown: object) -> datetime:
    seconds = value / 1000 if abs(value) > _MILLISECONDS_ABOVE else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        raise ValueError(f"{shown!r} is out of range") from None


def _parse(value: object) -> tuple[str, datetime] | None:
    """A time value as written (or rewritten as ISO UTC) and as an aware datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        if _EPOCH_DIGITS.match(value):
            moment = _from_epoch(float(value), value)
            return _iso(moment), moment
        try:
            moment = datetime.fromisoformat(value)
        except ValueError:
            raise ValueError(f"{value!r} is not ISO 8601 or epoch seconds") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
            return _iso(moment), moment
        return value, moment
    if isinstance(value, int | float) and not isinstance(value, bool):
        moment = _from_epoch(value, value)
        return _iso(moment), moment
    raise ValueError(f"must be an ISO 8601 string or epoch number, got {value!r}")


def parse_start_time(value: datetime | str | None) -> datetime | None:
    """``start_time`` as an aware datetime (naive is UTC); ``InvalidInputError`` if unusable."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value)
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
) -> DatedRecords:
    """The timestamp of each record from its own time value (None: it has none).

    Raises ``bad_time(...)`` for a present but unusable value, and ``InvalidInputError``
    for a ``start_time`` later than the file's first own time.
    """
    own: list[datetime | None] = []
    written: list[str | None] = []
    for index, value in enumerate(values):
        try:
            parsed = _parse(value[1]) if value is not None else None
        except ValueError as exc:
            assert value is not None
            raise bad_time(index, value[0], f"{value[0]} {exc}") from None
        own.append(parsed[1] if parsed else None)
        written.append(parsed[0] if parsed else None)
    try:
        filled, fallback = _fill(own, written, start_time, interval, now, where)
        timestamps = [t if t is not None else _iso(filled[i]) for i, t in enumerate(written)]
        order = sorted(filled)
        report = ImportTimes(
            own=len(values) - len(filled),
            filled=len(filled),
            fallback=fallback if filled else "none",
            interval=interval,
            first=_iso(filled[order[0]]) if order else None,
            last=_iso(filled[order[-1]]) if order else None,
        )
    except OverflowError:
        raise InvalidInputError(
            f"an interval of {interval:g} s dates the file's messages outside the years "
            "1 to 9999; choose a smaller interval"
        ) from None
    return DatedRecords(timestamps, report)


def _fill(
    own: Sequence[datetime | None],
    written: Sequence[str | None],
    start_time: datetime | None,
    interval: float,
    now: datetime | None,
    where: Callable[[int], str],
) -> tuple[dict[int, datetime], TimeFallback]:
    """The time of every record without one, by index, and the fallback that gave it."""
    count = len(own)
    step = timedelta(seconds=interval)
    first = next((i for i, moment in enumerate(own) if moment is not None), None)
    fallback: TimeFallback = "neighbours"
    filled: dict[int, datetime] = {}
    if first is None:
        if start_time is not None:
            base, fallback = start_time, "start-time"
        else:
            base, fallback = (now or import_clock()) - step * (count - 1), "import-time"
        filled = {i: base + step * i for i in range(count)}
    else:
        anchor = own[first]
        assert anchor is not None
        if first and start_time is not None:
            if start_time > anchor:
                raise InvalidInputError(
                    f"start time {_iso(start_time)} is later than the first time in the "
                    f"file ({written[first]}, {where(first)}); leave the start time "
                    "out to count back from it"
                )
            fallback = "start-time"
            gap = min(step, (anchor - start_time) / first)
            filled.update({i: start_time + gap * i for i in range(first)})
        else:
            filled.update({i: anchor - step * (first - i) for i in range(first)})
        filled.update(_fill_forward(own, first, step))
    return filled, fallback


def _fill_forward(
    own: Sequence[datetime | None], first: int, step: timedelta
) -> dict[int, datetime]:
    """Times for the undated records after ``first``: the last own time plus a step each,
    the step narrowed so a run of them never passes the next own time."""
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
            following = own[end] if end < len(own) else None
            gap = step
            if following is not None and following >= last:
                gap = min(step, (following - last) / (run + 1))
            filled.update({index + k: last + gap * k for k in range(1, run + 1)})
        index = end
    return filled
