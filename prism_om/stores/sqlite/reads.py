"""The reads of the SQLite adapter: ``SqlReads`` with what is SQLite's own.

A statement runs through ``retrying`` (a busy file is retried, ``sqlite3`` errors are
translated), a page is SQLite's one statement (``page_statement``), a recall by id is one
statement too (``sql/recall_rows.py``), and damage leaves a ``<file>-damaged`` note that
stops writes in other processes too.
"""

from __future__ import annotations

import builtins
import contextlib
import os
from collections.abc import Iterable
from typing import Any, Literal

import aiosqlite

from ...core.ledger import ObservationalMemoryLedger
from ...entries import SessionEntry, now_timestamp
from ...errors import CorruptStoreError
from ..arguments import check_entry_id, check_leaf_id, check_page_args
from ..sql.connection import Params, SqlReader
from ..sql.damage import first_line, fold_rows_parse
from ..sql.placement import check_page_head, sorted_pieces
from ..sql.reads import SqlReads
from ..sql.recall_rows import recall_ledger, recall_statement, split_recall_rows
from ..sql.statements import ELIGIBLE_ROLES
from .connect import DAMAGED_SUFFIX
from .loop_page import PageStart
from .page_statement import PAGE_SQL, PIECE_ROWS_SQL, pieces_beyond
from .translate import retrying


class SqliteReads(SqlReads):
    """``SqlReads`` on a SQLite file: its reader and writer connections (aiosqlite), its
    page statement, and the damage note beside the file."""

    _reader: aiosqlite.Connection
    _writer: aiosqlite.Connection
    _location: str

    async def _page_rows(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"],
        leaf_id: str | None,
        parts: bool,
    ) -> builtins.list[Any]:
        """The entry rows (``parts``: ``_rows.PART_COLUMNS`` rows) of the page in page
        order, one more than ``limit`` when more follow; the arguments and the cursor
        checked first."""
        check_entry_id(cursor, "cursor")
        check_page_args(limit, direction)
        check_leaf_id(leaf_id)
        session_id = self._session(session_id)
        want = limit + 1  # one more tells whether another page follows
        forward = direction == "forward"
        head, piece_rows, rows = await self._page_start(
            session_id, leaf_id, cursor, want, forward, parts
        )
        check_page_head(
            session_id=session_id, leaf_id=leaf_id, cursor=cursor, head=head, url=self.url
        )
        depth = head[2]
        assert depth is not None  # check_page_head refuses a cursor off the branch
        found = builtins.list(rows)
        if len(found) < want:
            # The cursor's piece ran out: the pieces beyond it, in page order.
            for segment_id, lo, hi in pieces_beyond(sorted_pieces(piece_rows), depth, forward):
                more_params = (segment_id, lo, hi, *ELIGIBLE_ROLES, want - len(found))
                found.extend(await self._fetch(PIECE_ROWS_SQL[forward, parts], more_params))
                if len(found) >= want:
                    break
        return found

    async def _page_start(
        self,
        session_id: str,
        leaf_id: str | None,
        cursor: str,
        want: int,
        forward: bool,
        parts: bool,
    ) -> PageStart:
        """The page's head, the branch's pieces and the rows of the cursor's own piece
        (whole, or ``parts`` rows), in one statement (``page_statement.PAGE_SQL``)."""
        params = {"session_id": session_id, "leaf_id": leaf_id, "cursor": cursor, "want": want}
        key = ("forward" if forward else "backward", "session" if leaf_id is None else "given")
        rows = await self._fetch(PAGE_SQL[key], params)
        current, owner, depth, kind, role = rows[0][1:6]
        pieces = [row[1:4] for row in rows if row[0] == 1]
        if parts:
            found = [(row[1], row[5], row[6]) for row in rows if row[0] == 2]
        else:
            found = [row[1:] for row in rows if row[0] == 2]
        return (current, owner, depth, kind, role), pieces, found

    async def memory_with_sources(
        self, session_id: str, memory_id: str
    ) -> tuple[ObservationalMemoryLedger, dict[str, SessionEntry]]:
        """The id's rows on the session's branch and the entries its observations there
        cite (``SOURCES_READ_AHEAD`` at most), from one statement: one snapshot, so the
        rows of one state are never paired with the sources of another."""
        session_id = self._session(session_id)
        memory_id = check_entry_id(memory_id, "memory_id")
        sql, params = recall_statement(session_id, memory_id)
        split = split_recall_rows(await self._fetch(sql, params))
        with fold_rows_parse(self.url, session_id):
            ledger = recall_ledger(*split[:4])
        return ledger, {entry.id: entry for entry in self._parse_rows(split.sources)}

    async def _read_rows(self, reader: SqlReader, sql: str, params: Params) -> Iterable[Any]:
        """One statement's rows, a busy file retried, ``sqlite3`` errors translated."""
        return await retrying(self.url, "read", lambda: reader.execute_fetchall(sql, params))

    def _open_reader(self) -> aiosqlite.Connection:
        self._check_open()
        return self._reader

    async def _started_reader(self) -> aiosqlite.Connection:
        """The reader, ready for statements (``SqliteStore`` may open it on first use)."""
        return self._open_reader()

    def _mark_damaged(self, exc: CorruptStoreError) -> None:
        """Refuse later writes, here and (through the note) in other processes."""
        if self._read_only or self._damaged is not None:
            return
        self._damaged = first_line(exc)
        note = self._location + DAMAGED_SUFFIX
        # The note is best effort: where it cannot be written, this process still refuses.
        with contextlib.suppress(OSError):
            fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, f"{now_timestamp()} {self._damaged}\n".encode())
            finally:
                os.close(fd)
