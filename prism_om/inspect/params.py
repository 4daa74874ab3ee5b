"""Query parameters of the inspect page: each route names the keys it takes, each is checked.

A bad value, an unknown key or a key given twice is an ``InspectParamError``, answered as
a 400 page with the reason; nothing is read from the store before the checks pass.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from ..core.records import ENTRY_ID_MAX_CHARS
from ..entries import validate_session_id
from ..errors import InvalidInputError, InvalidSessionIdError
from ..ids import is_memory_id

__all__ = [
    "FILTER_MAX_CHARS",
    "TIMELINE_LIMIT_DEFAULT",
    "TIMELINE_LIMIT_MAX",
    "InspectParamError",
    "Query",
    "shown",
]

TIMELINE_LIMIT_DEFAULT: Final = 50
TIMELINE_LIMIT_MAX: Final = 200
FILTER_MAX_CHARS: Final = 200
# Offsets into lists the page holds in memory; larger than any list it shows.
_OFFSET_MAX: Final = 10_000_000


class InspectParamError(InvalidInputError):
    """A query parameter the inspect page refuses (answered with HTTP 400)."""


def shown(value: str, limit: int = 40) -> str:
    """``value`` for a reason: whole when short, else its start and its length."""
    if len(value) <= limit:
        return repr(value)
    return f"{value[:limit]!r}... ({len(value):,} characters)"


class Query:
    """The query string of one request, restricted to the keys a route accepts."""

    def __init__(self, items: Iterable[tuple[str, str]], allowed: Iterable[str]) -> None:
        known = set(allowed)
        values: dict[str, str] = {}
        for key, value in items:
            if key not in known:
                names = ", ".join(sorted(known)) or "none"
                raise InspectParamError(
                    f"unknown query parameter {shown(key)} (this page takes: {names})"
                )
            if key in values:
                raise InspectParamError(f"query parameter {key!r} is given twice")
            values[key] = value
        self._values: Mapping[str, str] = values

    def text(self, key: str, max_chars: int = FILTER_MAX_CHARS) -> str | None:
        value = self._values.get(key)
        if value is not None and len(value) > max_chars:
            raise InspectParamError(
                f"{key} must be at most {max_chars} characters, got {len(value):,}"
            )
        return value or None

    def entry_id(self, key: str) -> str | None:
        value = self._values.get(key)
        if value is None:
            return None
        if not value or len(value) > ENTRY_ID_MAX_CHARS or not value.isprintable():
            raise InspectParamError(
                f"{key} must be an entry id of 1-{ENTRY_ID_MAX_CHARS} printable characters, "
                f"got {shown(value)}"
            )
        return value

    def memory_id(self, key: str) -> str | None:
        value = self._values.get(key)
        if value is None:
            return None
        if not is_memory_id(value):
            raise InspectParamError(
                f"{key} must be a memory id of 12 lowercase hex characters, got {shown(value)}"
            )
        return value

    def count(self, key: str, default: int, minimum: int, maximum: int = _OFFSET_MAX) -> int:
        value = self._values.get(key)
        if value is None:
            return default
        if not (value.isascii() and value.isdigit()) or not minimum <= int(value) <= maximum:
            raise InspectParamError(
                f"{key} must be an integer from {minimum} to {maximum:,}, got {shown(value)}"
            )
        return int(value)

    def choice(self, key: str, options: tuple[str, ...]) -> str:
        value = self._values.get(key, options[0])
        if value not in options:
            raise InspectParamError(
                f"{key} must be one of {', '.join(options)}, got {shown(value)}"
            )
        return value


def session_id_param(value: str) -> str:
    """A session id from the path, or an ``InspectParamError`` naming it."""
    try:
        return validate_session_id(value)
    except InvalidSessionIdError:
        raise InspectParamError(
            f"session id must be 1-128 characters of [A-Za-z0-9._:-] starting with a letter "
            f"or digit, got {shown(value)}"
        ) from None
