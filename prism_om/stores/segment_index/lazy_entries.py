"""Entries by id where a message is only where its line lies in its session's file.

The JSONL adapter keeps every entry's place in the tree in memory, but a message's body
only while it is in a small cache: the value of a message id is ``(session id, offset,
length)`` of its line, read back (``os.pread``) and parsed when the message is read, so a
process holding a long session holds its offsets and indexes, not its text. Other
entries (memory records, compactions) are few and read by every ledger, so they stay
parsed. Lookups, ``in``, ``len`` and iteration over ids cost what a dict's do.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import repeat
from typing import Any, cast

from ...entries import SessionEntry

__all__ = ["BODY_CACHE_BYTES", "BODY_CACHE_ENTRIES", "LazyEntries", "Span", "pop_entry"]

# What the cache of parsed messages holds at most: this many entries, and lines of this
# many bytes in all. A read of more than a quarter of either (a whole branch) is not
# cached, so it does not push out what the per-turn reads keep reading.
BODY_CACHE_ENTRIES = 2048
BODY_CACHE_BYTES = 4 << 20

# (entry id, offset, length) of a message line in its session's file.
Span = tuple[str, int, int]
# The reader: parses the lines of ``spans`` in the file of session ``sid``, in order.
ReadLines = Callable[[str, Sequence[Span]], list[SessionEntry]]

_MISSING: Any = object()


class LazyEntries(dict[str, SessionEntry]):
    """``dict[str, SessionEntry]`` whose message values are read from their file."""

    __slots__ = ("_cache", "_cached_bytes", "_read")

    def __init__(self, read: ReadLines) -> None:
        super().__init__()
        self._read = read
        # entry id -> (entry, line length), least recently read first.
        self._cache: OrderedDict[str, tuple[SessionEntry, int]] = OrderedDict()
        self._cached_bytes = 0

    # -- placing -------------------------------------------------------------------------

    def keep_at(self, entry_id: str, session_id: str, offset: int, length: int) -> None:
        """Hold only where the message ``entry_id`` lies in ``session_id``'s file."""
        dict.__setitem__(self, entry_id, cast(SessionEntry, (session_id, offset, length)))

    def keep_many_at(
        self, ids: Sequence[str], session_id: str, offsets: Iterable[int], lengths: Iterable[int]
    ) -> None:
        """``keep_at`` for a run of messages."""
        dict.update(self, zip(ids, zip(repeat(session_id), offsets, lengths), strict=False))

    def remember(self, entry: SessionEntry, length: int) -> None:
        """Cache a message already placed with ``keep_at`` (just written or read)."""
        self._add_to_cache(entry.id, entry, length)

    def is_located(self, entry_id: str) -> bool:
        return type(cast(object, dict.get(self, entry_id))) is tuple

    def session_of(self, entry_id: str) -> str | None:
        """The session holding ``entry_id`` (None: no such entry), reading no file."""
        value = cast(object, dict.get(self, entry_id))
        if value is None:
            return None
        if type(value) is tuple:
            return cast(str, value[0])
        return cast(SessionEntry, value).session_id

    def cached_messages(self) -> int:
        """How many message bodies the cache holds now (what a RAM test counts)."""
        return len(self._cache)

    # -- reading -------------------------------------------------------------------------

    def __getitem__(self, entry_id: str) -> SessionEntry:
        value: object = dict.__getitem__(self, entry_id)
        if type(value) is tuple:
            return self.many((entry_id,))[0]
        return cast(SessionEntry, value)

    def many(self, ids: Sequence[str], *, cache: bool | None = None) -> list[SessionEntry]:
        """The entries of ``ids`` (all present), each file opened once for its misses.

        Read lines are cached unless ``cache`` is False or, by default, the read is a
        large one (see ``BODY_CACHE_ENTRIES``).
        """
        if cache is None:
            cache = len(ids) <= BODY_CACHE_ENTRIES // 4
        found: dict[str, SessionEntry] = {}
        wanted: dict[str, list[Span]] = {}
        kept = self._cache
        for entry_id in ids:
            value: object = dict.__getitem__(self, entry_id)
            if type(value) is not tuple:
                found[entry_id] = cast(SessionEntry, value)
                continue
            hit = kept.get(entry_id)
            if hit is not None:
                kept.move_to_end(entry_id)
                found[entry_id] = hit[0]
                continue
            sid, offset, length = cast(tuple[str, int, int], value)
            wanted.setdefault(sid, []).append((entry_id, offset, length))
        for sid, spans in wanted.items():
            for (entry_id, _, length), entry in zip(spans, self._read(sid, spans), strict=True):
                found[entry_id] = entry
                if cache and length <= BODY_CACHE_BYTES // 4:
                    self._add_to_cache(entry_id, entry, length)
        return [found[i] for i in ids]

    def _add_to_cache(self, entry_id: str, entry: SessionEntry, length: int) -> None:
        kept = self._cache
        old = kept.pop(entry_id, None)
        if old is not None:
            self._cached_bytes -= old[1]
        kept[entry_id] = (entry, length)
        self._cached_bytes += length
        while len(kept) > BODY_CACHE_ENTRIES or self._cached_bytes > BODY_CACHE_BYTES:
            _, (_, dropped) = kept.popitem(last=False)
            self._cached_bytes -= dropped

    def get(self, entry_id: str, default: Any = None) -> Any:
        if dict.get(self, entry_id, _MISSING) is _MISSING:
            return default
        return self[entry_id]

    def values(self) -> list[SessionEntry]:  # type: ignore[override]
        return self.many(list(self))

    def items(self) -> list[tuple[str, SessionEntry]]:  # type: ignore[override]
        ids = list(self)
        return list(zip(ids, self.many(ids), strict=True))

    def __iter__(self) -> Iterator[str]:
        return dict.__iter__(self)

    # -- removing ------------------------------------------------------------------------

    def pop_parsed(self, entry_id: str) -> SessionEntry | None:
        """Remove an entry; None for a message (which no memory-id index names)."""
        value: object = dict.pop(self, entry_id)
        hit = self._cache.pop(entry_id, None)
        if hit is not None:
            self._cached_bytes -= hit[1]
        return None if type(value) is tuple else cast(SessionEntry, value)

    def forget_cached(self) -> None:
        self._cache.clear()
        self._cached_bytes = 0


def pop_entry(entries: dict[str, SessionEntry], entry_id: str) -> SessionEntry | None:
    """Remove ``entry_id``; None for a message a ``LazyEntries`` holds by its place."""
    if isinstance(entries, LazyEntries):
        return entries.pop_parsed(entry_id)
    return entries.pop(entry_id)
