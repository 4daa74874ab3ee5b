"""Dates printed wrong: what a reader of the demo or of the README examples would catch.

Two kinds: a weekday named beside a date that falls on another weekday ("Monday 2026-03-17"),
and a date the observer wrote in parentheses right before a different written date
(``Tuesday (3 March 2026) 2026-03-17``: the weekday beside an explicit date resolved again
against the message's time).
"""

from __future__ import annotations

import re
from datetime import date

__all__ = ["wrong_dates"]

_MONTHS = "january february march april may june july august september october november december"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = "|".join(m.capitalize() for m in _MONTHS.split())
_DATE = rf"(?:\d{{4}}-\d{{2}}-\d{{2}}|\d{{1,2}} (?:{_MONTH}),? \d{{4}})"
_WEEKDAY_DATE = re.compile(
    rf"\b(?P<day>{'|'.join(d.capitalize() for d in _WEEKDAYS)}),?\s+\(?(?P<date>{_DATE})"
)
_TWO_DATES = re.compile(rf"\((?P<first>{_DATE})\)\s+(?P<second>{_DATE})")


def _day(text: str) -> date:
    if "-" in text:
        return date.fromisoformat(text)
    day, month, year = text.replace(",", "").split()
    return date(int(year), _MONTHS.split().index(month.lower()) + 1, int(day))


def wrong_dates(text: str) -> list[str]:
    """Every wrongly printed date of ``text``, with what is wrong about it."""
    found: list[str] = []
    for match in _WEEKDAY_DATE.finditer(text):
        if _WEEKDAYS[_day(match["date"]).weekday()] != match["day"].lower():
            found.append(f"{match[0]!r}: {match['date']} is no {match['day']}")
    for match in _TWO_DATES.finditer(text):
        if _day(match["first"]) != _day(match["second"]):
            found.append(f"{match[0]!r}: a date resolved beside another written date")
    return found
