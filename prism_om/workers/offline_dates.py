"""Dates for the offline observer: the message's own time, dates written in its text, and
relative dates resolved against them.

A message may open with a date header as benchmark transcripts write it (``[8:56 pm on 20
July, 2023]``); that header, when present, is the message's time for everything after it,
since it says when the words were said (an import may have stamped the message later).
Relative expressions resolve against that time, and only where what they name is certain,
each written as the unit it names: a day (``yesterday``, ``last night``, ``the day before
yesterday``, ``tomorrow``, ``the day after tomorrow``, ``N days ago``, ``in N days``,
``last``/``next``/``this`` + weekday, ``on``/``by`` + weekday: past when the words before it
speak in the past tense with no future after, else the coming one) as the day, a week
(``last week``, ``N weeks ago``) as ``the week of`` its Monday, a weekend as ``the weekend
of`` its Saturday, a month (``next month``, ``N months ago``) as the month, a year (``last
year``, ``N years ago``) as the year; ``a few days ago`` as ``a few days before`` the day.
Written dates (``20 July, 2023``, ``July 20, 2023``, ``22 May`` with the year of the
message, ISO ``2023-07-20``) are read as they are, never resolved again, and a weekday beside
one (``Tuesday 2026-03-17``) is part of it. Idioms (``it feels like yesterday``) are left
alone. Each resolution is written into the text after the expression that named it
(``yesterday (7 May 2023)``), so the memory states the date itself, and the first day named
is returned as the observation's ``referencedDate``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
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
# Relative days whose day is certain, longest first so "the day before yesterday" is not
# read as "yesterday".
_RELATIVE: Final[tuple[tuple[re.Pattern[str], int], ...]] = (
    (re.compile(r"\b(?:the )?day before yesterday\b", re.I), -2),
    (re.compile(r"\b(?:the )?day after tomorrow\b", re.I), 2),
    (re.compile(r"\b(?:yesterday|last night)\b", re.I), -1),
    (re.compile(r"\b(today|tonight|this (morning|afternoon|evening))\b", re.I), 0),
    (re.compile(r"\btomorrow\b", re.I), 1),
)
_NUMBER = r"(?P<n>\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten|twelve)"
_AGO = re.compile(rf"\b{_NUMBER} (?P<unit>day|week|month|year)s? ago\b", re.I)
_IN = re.compile(rf"\bin {_NUMBER} (?P<unit>day|week|month|year)s?\b", re.I)
_FEW_AGO = re.compile(
    r"\b(?P<few>(?:a )?few|a couple(?: of)?|several) (?P<unit>day|week)s? ago\b", re.I
)
# A unit named relative to now: written as that unit, never as an invented day.
_UNIT = re.compile(r"\b(?P<which>last|next|this) (?P<unit>week|month|year)\b", re.I)
_WEEKEND = re.compile(r"\b(?P<which>last|next|this) weekend\b", re.I)
_NUMBERS: Final = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "twelve": 12,
}
# Idioms that name a day without meaning one: "it feels like yesterday", "yesterday's news".
_IDIOM = re.compile(
    r"\b(?:(?:feels?|felt|seems?|seemed|looks?|looked) like (?:it was |it's )?(?:only |just )?"
    r"yesterday|(?:as if|as though|like) it (?:was|were) (?:only |just )?yesterday|"
    r"born yesterday|yesterday's news|tomorrow is another day|"
    r"(?:a )?(?:day|week|month|year) (?:or two )?ago or (?:two|so)|"
    r"today's (?:world|society|age|standards)|these days|nowadays)",
    re.I,
)
# What may sit between a weekday and the written date it names ("Tuesday, 17 March",
# "Tuesday (3 March)", "on Tuesday the 17th"): that weekday is part of the written date.
_BETWEEN = re.compile(r"^[\s,(]*(?:the\s+)?$")


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
    dated: bool = False
    """Whether the text names a date of any unit (a day, week, month or year)."""


def resolve_dates(
    sentence: str, moment: datetime | None, hold: Callable[[str], str] | None = None
) -> DatedText:
    """``sentence`` with each relative date followed by what it means, in its own unit.

    A day is written as a day (``yesterday (7 May 2023)``), a week as ``the week of`` its
    Monday, a month as the month, a year as the year. Dates written in the sentence are
    read, never resolved again, and a weekday beside one is part of it. Idioms ("it
    feels like yesterday") name no date. ``referenced`` is the first day named (a week,
    month or year is no day). ``hold`` wraps each resolution written in.
    """
    if moment is None:
        iso = _ISO.search(sentence)
        return DatedText(sentence, iso["iso"] if iso and _valid(iso["iso"]) else None)
    today = moment.date()
    # start, end, label to write after it ("" for a written date), the day (None: no day)
    found: list[tuple[int, int, str, date | None]] = []

    def add(match: re.Match[str], label: str | None, day: date | None = None) -> None:
        if label is None:
            return
        if any(s < match.end() and match.start() < e for s, e, _, _ in found):
            return
        found.append((match.start(), match.end(), label, day))

    for match in _IDIOM.finditer(sentence):
        add(match, "")
    for match in _ISO.finditer(sentence):
        day = date.fromisoformat(match["iso"]) if _valid(match["iso"]) else None
        add(match, "" if day else None, day)
    for pattern in (_DAY_MONTH, _MONTH_DAY):
        for match in pattern.finditer(sentence):
            day = _written(match, today)
            add(match, "" if day else None, day)
    for pattern, days in _RELATIVE:
        for match in pattern.finditer(sentence):
            day = today + timedelta(days=days)
            add(match, date_text(day), day)
    for match in _FEW_AGO.finditer(sentence):
        few = match["few"].lower()
        few = (
            "a few"
            if few == "few"
            else few.replace("a couple", "a couple of").replace("of of", "of")
        )
        add(match, f"{few} {match['unit'].lower()}s before {date_text(today)}")
    for match in _AGO.finditer(sentence):
        add(match, *_shifted(today, -_count(match), match["unit"].lower()))
    for match in _IN.finditer(sentence):
        add(match, *_shifted(today, _count(match), match["unit"].lower()))
    for match in _UNIT.finditer(sentence):
        step = {"last": -1, "next": 1}.get(match["which"].lower(), 0)
        add(match, *_shifted(today, step, match["unit"].lower()))
    for match in _WEEKEND.finditer(sentence):
        saturday = (5 - today.weekday()) % 7
        shift = {"last": saturday - 7 if saturday else -7, "next": saturday or 7}.get(
            match["which"].lower(), saturday
        )
        add(match, f"the weekend of {date_text(today + timedelta(days=shift))}")
    written = [(s, e) for s, e, label, day in found if label == "" and day is not None]
    for match in _WEEKDAY.finditer(sentence):
        before = sentence[: match.start()]
        if re.search(r"\b(every|each)\s*$", before, re.I):
            continue
        if any(
            (s >= match.end() and _BETWEEN.match(sentence[match.end() : s]))
            or (e <= match.start() and _BETWEEN.match(sentence[e : match.start()]))
            for s, e in written
        ):
            add(match, "")  # "Tuesday 2026-03-17": the written date says which Tuesday
            continue
        day = _weekday(match, today, _past_tense(before))
        add(match, date_text(day), day)
    found.sort(key=lambda f: (f[0], f[1]))
    parts: list[str] = []
    cursor = 0
    for _start, end, label, _day in found:
        parts.append(sentence[cursor:end])
        if label and not sentence[end:].lstrip().startswith(f"({label})"):
            # ``hold`` keeps the resolution as written through later rewrites.
            parts.append(" " + (hold or str)(f"({label})"))
        cursor = end
    parts.append(sentence[cursor:])
    named = [when for _, _, _, when in found if when is not None]
    # A written date, or a resolution of a relative one (an idiom's span is neither).
    dated = any(when is not None or label for _, _, label, when in found)
    return DatedText("".join(parts), named[0].isoformat() if named else None, dated)


def _count(match: re.Match[str]) -> int:
    raw = match["n"].lower()
    return _NUMBERS.get(raw) or int(raw)


def _shifted(today: date, n: int, unit: str) -> tuple[str, date | None]:
    """The label of ``n`` ``unit``s from ``today``, and its day when the unit is a day."""
    if unit == "day":
        day = today + timedelta(days=n)
        return date_text(day), day
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=n)
        return f"the week of {date_text(monday)}", None
    if unit == "month":
        index = today.year * 12 + today.month - 1 + n
        return f"{_MONTHS[index % 12].capitalize()} {index // 12}", None
    return str(today.year + n), None


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
