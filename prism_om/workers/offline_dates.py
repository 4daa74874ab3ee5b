"""Dates for the offline observer: the message's own time, dates written in its text, and
relative dates resolved against them.

A message may open with a date header as benchmark transcripts write it (``[8:56 pm on 20
July, 2023]``); that header, when present, is the message's time for everything after it,
since it says when the words were said (an import may have stamped the message later).
Relative expressions resolve against that time: ``today``/``tonight``, ``yesterday``,
``tomorrow``, ``last``/``next``/``this`` + weekday, ``on``/``by`` + weekday (past when the
words before it speak in the past tense with no future after, else the coming one),
``last``/``next week``, ``weekend``, ``month``, ``N days ago``, ``in N days``. Written
dates (``20 July, 2023``, ``July 20, 2023``, ``22 May`` with the year of the message, ISO
``2023-07-20``) are read as they are. Each resolved date is written into the text after the
expression that named it (``yesterday (7 May 2023)``), so the memory states the day
itself, and the first one is returned as the observation's ``referencedDate``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Final

__all__ = ["DatedText", "date_text", "message_moment", "resolve_dates"]

_MONTHS: Final = (
    "january february march april may june july august september october november december"
).split()
_MONTH = (
    r"(?P<month>"
    + "|".join(m.capitalize() for m in _MONTHS)
    + r"|"
    + "|".join(m[:3].capitalize() for m in _MONTHS)
    + r")\.?"
)
_WEEKDAYS: Final = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_HEADER = re.compile(
    r"^\s*\[(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<half>am|pm)\s+on\s+(?P<day>\d{1,2})\s+"
    + _MONTH
    + r",?\s+(?P<year>\d{4})\]\s*",
    re.IGNORECASE,
)
_DAY_MONTH = re.compile(
    r"\b(?P<day>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+(?P<year>\d{4}))?\b"
)
_MONTH_DAY = re.compile(
    r"\b" + _MONTH + r"\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?(?:,?\s+(?P<year>\d{4}))?\b"
)
_ISO = re.compile(r"\b(?P<iso>\d{4}-\d{2}-\d{2})\b")
_PAST = re.compile(
    r"\b(was|were|went|did|had|got|ran|met|saw|took|made|came|gave|told|bought|found|"
    r"left|felt|began|wrote|ate|won|lost|[a-z]{3,}ed)\b",
    re.IGNORECASE,
)
# Future after a past verb: "will", "going to", or an infinitive ("decided to ship"), not
# "to" before a noun phrase ("went to the gym", "went to Porto").
_FUTURE = re.compile(
    r"\b(?:[Ww]ill|[Gg]oing to|[Gg]onna)\b|'ll\b|"
    r"\bto (?!(?:a|an|the|my|your|his|her|our|their|this|that|some|work|school|bed)\b)[a-z]+"
)
_WEEKDAY = re.compile(
    r"\b(?P<which>last|next|this|on|by|until|since)?\s*(?P<day>" + "|".join(_WEEKDAYS) + r")\b",
    re.IGNORECASE,
)
_RELATIVE: Final[tuple[tuple[re.Pattern[str], int], ...]] = (
    (re.compile(r"\byesterday\b", re.I), -1),
    (re.compile(r"\b(today|tonight|this (morning|afternoon|evening))\b", re.I), 0),
    (re.compile(r"\btomorrow\b", re.I), 1),
    (re.compile(r"\blast week\b", re.I), -7),
    (re.compile(r"\bnext week\b", re.I), 7),
    (re.compile(r"\blast month\b", re.I), -30),
    (re.compile(r"\bnext month\b", re.I), 30),
)
_COUNT = r"(?P<n>\d{1,3}|a|one|two|three|four|five|six) (?P<unit>day|week)s?"
_AGO = re.compile(rf"\b{_COUNT} ago\b", re.I)
_IN = re.compile(rf"\bin {_COUNT}\b", re.I)
_WEEKEND = re.compile(r"\b(?P<which>last|next|this) weekend\b", re.I)
_NUMBERS: Final = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def date_text(day: date) -> str:
    """A date as people write it: ``7 May 2023``."""
    return f"{day.day} {_MONTHS[day.month - 1].capitalize()} {day.year}"


def message_moment(text: str, timestamp: str) -> tuple[str, datetime | None]:
    """The text without a leading date header, and the moment it was said."""
    header = _HEADER.match(text)
    if header:
        hour = int(header["hour"]) % 12 + (12 if header["half"].lower() == "pm" else 0)
        try:
            moment = datetime(
                int(header["year"]),
                _month(header["month"]),
                int(header["day"]),
                hour,
                int(header["minute"]),
            )
        except ValueError:
            moment = None
        if moment is not None:
            return text[header.end() :], moment
    try:
        return text, datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return text, None


def _month(name: str) -> int:
    return [m[:3] for m in _MONTHS].index(name[:3].lower()) + 1


@dataclass(frozen=True)
class DatedText:
    text: str
    referenced: str | None
    """The first date the text names, ISO."""


def resolve_dates(sentence: str, moment: datetime | None) -> DatedText:
    """``sentence`` with each relative date followed by the day it means."""
    if moment is None:
        iso = _ISO.search(sentence)
        return DatedText(sentence, iso["iso"] if iso and _valid(iso["iso"]) else None)
    today = moment.date()
    found: list[tuple[int, int, date, bool]] = []  # start, end, day, written already

    def add(match: re.Match[str], day: date | None, written: bool = False) -> None:
        if day is None:
            return
        if any(s < match.end() and match.start() < e for s, e, _, _ in found):
            return
        found.append((match.start(), match.end(), day, written))

    for match in _ISO.finditer(sentence):
        add(match, date.fromisoformat(match["iso"]) if _valid(match["iso"]) else None, True)
    for pattern in (_DAY_MONTH, _MONTH_DAY):
        for match in pattern.finditer(sentence):
            add(match, _written(match, today), True)
    for pattern, days in _RELATIVE:
        for match in pattern.finditer(sentence):
            add(match, today + timedelta(days=days))
    for match in _AGO.finditer(sentence):
        add(match, today - _span(match))
    for match in _IN.finditer(sentence):
        add(match, today + _span(match))
    for match in _WEEKEND.finditer(sentence):
        saturday = (5 - today.weekday()) % 7
        shift = {"last": saturday - 7 if saturday else -7, "next": saturday or 7}.get(
            match["which"].lower(), saturday
        )
        add(match, today + timedelta(days=shift))
    for match in _WEEKDAY.finditer(sentence):
        before = sentence[: match.start()]
        if not re.search(r"\b(every|each)\s*$", before, re.I):
            add(match, _weekday(match, today, _past_tense(before)))
    if not found:
        return DatedText(sentence, None)
    found.sort()
    parts: list[str] = []
    cursor = 0
    for _start, end, day, written in found:
        parts.append(sentence[cursor:end])
        if not written:
            parts.append(f" ({date_text(day)})")
        cursor = end
    parts.append(sentence[cursor:])
    return DatedText("".join(parts), found[0][2].isoformat())


def _past_tense(before: str) -> bool:
    """Whether the words before a weekday speak of the past: a past-tense verb with no
    future after it ("we decided to ship on Friday" is the coming Friday)."""
    pasts = list(_PAST.finditer(before))
    if not pasts:
        return False
    return not _FUTURE.search(before, pasts[-1].end())


def _valid(iso: str) -> bool:
    try:
        date.fromisoformat(iso)
    except ValueError:
        return False
    return True


def _written(match: re.Match[str], today: date) -> date | None:
    year = int(match["year"]) if match["year"] else today.year
    try:
        return date(year, _month(match["month"]), int(match["day"]))
    except ValueError:
        return None


def _span(match: re.Match[str]) -> timedelta:
    raw = match["n"].lower()
    n = _NUMBERS.get(raw) or int(raw)
    return timedelta(days=n * (7 if match["unit"].lower() == "week" else 1))


def _weekday(match: re.Match[str], today: date, past: bool) -> date:
    target = _WEEKDAYS.index(match["day"].lower())
    which = (match["which"] or "").lower()
    back = (today.weekday() - target) % 7 or 7  # days since the last such weekday
    ahead = (target - today.weekday()) % 7 or 7  # days to the next one
    if which in ("last", "since") or (which in ("on", "") and past):
        return today - timedelta(days=back)
    if which == "this":
        return today + timedelta(days=(target - today.weekday()) % 7)
    return today + timedelta(days=ahead)
