"""Entries by id where some values are still the JSON line they were read from.

A JSONL reopen whose index sidecar vouches for the file (see ``_jsonl_index``) keeps
message lines as bytes and parses one only when it is read: a reopen then costs the
index, not a validation per line. Lookups, ``in``, ``len`` and iteration over ids cost
what a dict's do; reading a value parses it once and keeps the entry.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, cast

from ..entries import SessionEntry

__all__ = ["LazyEntries", "pop_entry"]

_MISSING: Any = object()


class LazyEntries(dict[str, SessionEntry]):
    """``dict[str, SessionEntry]`` whose raw values are parsed on first access.

    ``parse(entry_id, line)`` turns a kept line into its entry (and raises the owner's
    error when it cannot).
    """

    __slots__ = ("_parse",)

    def __init__(self, parse: Callable[[str, bytes], SessionEntry]) -> None:
        super().__init__()
        self._parse = parse

    def keep_raw(self, entry_id: str, line: bytes) -> None:
        """Hold ``line`` for ``entry_id`` until someone reads it."""
        dict.__setitem__(self, entry_id, cast(SessionEntry, line))

    def is_raw(self, entry_id: str) -> bool:
        return type(cast(object, dict.get(self, entry_id))) is bytes

    def __getitem__(self, entry_id: str) -> SessionEntry:
        value: object = dict.__getitem__(self, entry_id)
        if type(value) is bytes:
            entry = self._parse(entry_id, value)
            dict.__setitem__(self, entry_id, entry)
            return entry
        return cast(SessionEntry, value)

    def get(self, entry_id: str, default: Any = None) -> Any:
        if dict.get(self, entry_id, _MISSING) is _MISSING:
            return default
        return self[entry_id]

    def values(self) -> list[SessionEntry]:  # type: ignore[override]
        return [self[i] for i in self]

    def items(self) -> list[tuple[str, SessionEntry]]:  # type: ignore[override]
        return [(i, self[i]) for i in self]

    def __iter__(self) -> Iterator[str]:
        return dict.__iter__(self)

    def pop_parsed(self, entry_id: str) -> SessionEntry | None:
        """Remove an entry; None when it was never parsed (a message line kept raw)."""
        value: object = dict.pop(self, entry_id)
        return None if type(value) is bytes else cast(SessionEntry, value)


def pop_entry(entries: dict[str, SessionEntry], entry_id: str) -> SessionEntry | None:
    """Remove ``entry_id``; None for a line a ``LazyEntries`` never parsed (always a
    message, which no memory-id index names)."""
    if isinstance(entries, LazyEntries):
        return entries.pop_parsed(entry_id)
    return entries.pop(entry_id)
