"""Bounded point reads on the event loop's own connection: no thread hop.

A hop to the reader's thread and back costs about what one aiosqlite round trip does, and
for a recall by id (a few rows by primary key or memory id) that is most of the call.
Such a read runs here instead, driven on the loop's thread against a read-only
connection of its own (``mode=ro``, busy timeout 0), under two guards that keep the loop
from ever waiting on the file:

- a statement bound to more than ``POINT_MAX_PARAMS`` values (a memory with many
  sources or supports) is no point read;
- a busy or locked file answers at once instead of waiting.

Either raises ``NotAPoint`` and the whole read is redone with a hop (reads have no side
effects); so does any other error, which the hop's reader then meets and reports. A
read-only store, a thread other than the one that opened the connection, or a connection
that cannot be opened (or failed) also take the hop.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ..sql.connection import Params
from .translate import _is_busy as is_busy

__all__ = ["KEPT_MAX", "POINT_MAX_PARAMS", "NotAPoint", "PointConnection"]

POINT_MAX_PARAMS = 64
"""Values bound to one statement of a point read: beyond it, the read takes a hop."""


KEPT_MAX = 64
"""Entries of ``PointConnection.kept`` (one per branch paged): beyond it, it starts over."""


class NotAPoint(Exception):
    """This read is not (or no longer) a point read here: redo it with a hop."""


class PointConnection:
    """A store's read-only connection for point reads, opened lazily on the loop's thread."""

    def __init__(self, location: str | None) -> None:
        # None: point reads are off (read-only stores keep their one connection). The URI
        # is fixed now: a later change of directory must not point it at another file.
        self._uri = None if location is None else f"{Path(location).absolute().as_uri()}?mode=ro"
        self.raw: sqlite3.Connection | None = None
        self._thread: int | None = None
        # What reads learnt of the file as it stood at ``_version`` (its PRAGMA
        # data_version), kept until another connection commits: see ``snapshot``.
        self.kept: dict[object, object] = {}
        self._version: int | None = None

    def get(self) -> sqlite3.Connection | None:
        """The connection for this thread, or None when point reads are unavailable."""
        if self._uri is None:
            return None
        if self.raw is None:
            try:
                raw = sqlite3.connect(self._uri, uri=True, timeout=0, isolation_level=None)
            except sqlite3.Error:
                self._uri = None  # the hop reports whatever is wrong
                return None
            self.raw, self._thread = raw, threading.get_ident()
        # sqlite3 refuses a connection on another thread than its own.
        return self.raw if self._thread == threading.get_ident() else None

    def fetch(self, sql: str, params: Params) -> list[Any]:
        """All rows of one statement, or ``NotAPoint`` (too wide, busy, or failing)."""
        assert self.raw is not None
        if len(params) > POINT_MAX_PARAMS:
            raise NotAPoint
        try:
            return self.raw.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            if not is_busy(exc):
                # Whatever else is wrong (a damaged file, one a read-only connection cannot
                # open) the hop's reader meets and reports, with its own translation; later
                # reads go straight to it.
                self.close()
            raise NotAPoint from exc

    def snapshot(self) -> PointConnection:
        """One read transaction for the statements inside (``with point.snapshot():``);
        ``kept`` valid for it.

        Every statement inside reads the same state of the file. Its ``data_version``
        changes whenever another connection (this store's writer, another process) has
        committed since the last look, so ``kept`` is emptied exactly then: what it holds
        was read from the state this transaction reads. (The connection is its own
        context manager, not a generator's: a page runs one per call, and the generator's
        machinery cost about a microsecond of it.)
        """
        return self

    def __enter__(self) -> None:
        self.fetch("BEGIN", ())
        try:
            ((version,),) = self.fetch("PRAGMA data_version", ())
        except BaseException:
            self.__exit__()
            raise
        if version != self._version or len(self.kept) > KEPT_MAX:
            self.kept.clear()
            self._version = version

    def __exit__(self, *exc: object) -> None:
        raw = self.raw
        if raw is not None and raw.in_transaction:
            try:
                raw.execute("COMMIT")
            except sqlite3.Error:
                self.close()  # closing ends the transaction; the hop serves later reads

    def close(self) -> None:
        """Close it (on its own thread; elsewhere sqlite3 refuses and GC closes it)."""
        raw, self.raw, self._uri = self.raw, None, None
        self.kept.clear()
        if raw is not None and self._thread == threading.get_ident():
            with contextlib.suppress(sqlite3.Error):
                raw.close()
