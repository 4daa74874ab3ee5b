"""``SqliteReads`` with every public read run in one hop to the reader's thread.

The read code is ``SqliteReads``' own (PostgreSQL runs it as written); here each public
read is driven to its end on the reader connection's worker thread (``worker_thread``), so its
statements and its parsing cost one hop in all, and the parsing of a long branch runs
off the event loop.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import sqlite3
from collections.abc import Callable, Coroutine, Iterable, Iterator
from typing import Any, Literal, TypeVar

from ...core.branch_snapshot import BranchSnapshot
from ...core.ledger import ObservationalMemoryLedger
from ...core.redaction import Redactor
from ...core.scope_map import WorkScopeMap
from ...entries import SessionEntry
from ...errors import CorruptStoreError
from ..arguments import check_count, check_entry_id, check_id_list, check_leaf_id, check_page_args
from ..base import MarkedData, MessagePart, SessionSummary
from ..search import SearchHit, SearchKind
from ..sql.connection import Params
from ..sql.placement import check_page_head
from ..sql.search_index import PENDING_SEGMENTS_SQL
from ..sql.statements import ELIGIBLE_ROLES, LeafPosition
from .loop_page import point_page_start
from .loop_reads import POINT_MAX_PARAMS, NotAPoint, PointConnection
from .page_statement import ENTRY_PART_ROWS_SQL, PIECE_ROWS_SQL, pieces_beyond
from .reads import SqliteReads
from .worker_thread import ThreadSlot, drive, fetch_direct, on_thread

T = TypeVar("T")

POINT_MAX_STATEMENTS = 8
"""Statements a multi-statement point read (``recent_messages``) may run on the loop."""


_V = TypeVar("_V")


def _replayable(values: _V) -> _V:
    """``values`` as given, or an iterator's values read into a tuple (readable again)."""
    if isinstance(values, Iterator):
        return tuple(values)  # type: ignore[return-value]
    return values


class _IndexFirst(Exception):
    """A search on the reader's thread met messages the index lacks: writing their rows
    waits on the writer, which a hop cannot do, so the search is run again off it."""


class OneHopReads(SqliteReads):
    """Every read of ``SqliteReads``, one thread hop per call."""

    # The raw reader connection while a read runs on its thread (set only there).
    _direct: ThreadSlot
    # The loop's own read-only connection for bounded point reads (``loop_reads``).
    _point: PointConnection
    # Statements the point read running now may still run (None: no such limit).
    _point_budget: int | None = None

    async def _hop(self, read: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        if self._direct.conn is not None:
            # Already on the reader's thread (a read calling another): run it in place.
            return await read(*args)
        reader = await self._started_reader()

        def run(raw: sqlite3.Connection) -> T:
            self._direct.conn = raw
            # One read transaction: every statement of the read sees one snapshot of the
            # file (a page's later pieces, a recall's sources), whatever commits meanwhile.
            # In WAL a reader never waits for a writer, so BEGIN costs two trivial steps.
            raw.execute("BEGIN")
            try:
                return drive(read(*args))
            finally:
                self._direct.conn = None
                if raw.in_transaction:
                    try:
                        raw.execute("COMMIT")  # a read transaction: nothing to write
                    except sqlite3.Error:
                        # Its rows are read already, and an error of the read itself (a
                        # damaged page, say) is the one to report: end it either way.
                        with contextlib.suppress(sqlite3.Error):
                            raw.execute("ROLLBACK")

        return await on_thread(reader, run)

    def _point_ready(self) -> bool:
        """Whether a point read would run on the loop's own connection now."""
        self._check_open()
        return self._direct.conn is None and self._point.get() is not None

    async def _read_point(
        self,
        reads: Callable[[], Coroutine[Any, Any, T]],
        keys: int,
        *,
        statements: int | None = None,
    ) -> T:
        """``reads()``, rows by ``keys`` ids, on the loop's own connection: no hop.

        Too many keys take the hop at once; a read that turns out wider, or meets a busy
        file, or runs more than ``statements`` statements (when given), is redone with one
        hop (see ``loop_reads``).
        """
        self._check_open()
        narrow = keys <= POINT_MAX_PARAMS and self._direct.conn is None
        raw = self._point.get() if narrow else None
        if raw is None:
            return await self._hop(reads)
        self._direct.conn = raw
        self._point_budget = statements
        try:
            return drive(reads())
        except NotAPoint:
            pass
        finally:
            self._direct.conn = None
            self._point_budget = None
        return await self._hop(reads)

    async def _fetch(self, sql: str, params: Params = ()) -> builtins.list[Any]:
        raw = self._direct.conn
        if raw is None:
            return await super()._fetch(sql, params)
        if raw is self._point.raw:
            if self._point_budget is not None:
                if self._point_budget <= 0:
                    raise NotAPoint
                self._point_budget -= 1
            return self._point.fetch(sql, params)
        try:
            return fetch_direct(raw, self.url, sql, params)
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise

    async def memory_with_sources(
        self, session_id: str, memory_id: str
    ) -> tuple[ObservationalMemoryLedger, dict[str, SessionEntry]]:
        """``SqliteReads``' one statement, on the loop's own connection when it can serve
        it now, else in one hop (a read-only store, another thread, a busy file)."""
        read = functools.partial(super().memory_with_sources, session_id, memory_id)
        return await self._read_point(read, 1)

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        return await self._hop(super().memory_head, session_id, leaf_id)

    async def get(self, entry_id: str) -> SessionEntry | None:
        return await self._hop(super().get, entry_id)

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        wanted = check_id_list(entry_ids, "entry_ids")
        # Rows by id: on the loop's own connection while narrow (no hop), else one hop.
        return await self._read_point(functools.partial(super().get_many, wanted), len(wanted))

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        return await self._hop(super().list, session_id)

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        return await self._hop(super().entries, session_id, leaf_id)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        return await self._hop(super().leaves, session_id)

    async def leaf(self, session_id: str) -> str | None:
        # One row by primary key: a point read (the open path's first read, too).
        return await self._read_point(functools.partial(super().leaf, session_id), 1)

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        return await self._hop(super().is_on_branch, session_id, entry_id, leaf_id)

    async def sessions(self) -> builtins.list[str]:
        return await self._hop(super().sessions)

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        return await self._hop(super().session_summaries)

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        return await self._hop(super().entry_count, session_id, leaf_id)

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int:
        return await self._hop(super().branch_tokens, session_id, leaf_id)

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        return await self._hop(super().entries_after, session_id, after_id, leaf_id)

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        count = check_count(count)
        read = functools.partial(super().recent_messages, session_id, count, leaf_id)
        if count > POINT_MAX_PARAMS:
            return await self._hop(read)
        # At most ``count`` rows, a statement per branch piece read: bounded by
        # ``POINT_MAX_STATEMENTS`` on the loop, beyond which the read takes the hop.
        return await self._read_point(read, 1, statements=POINT_MAX_STATEMENTS)

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        return await self._hop(super().ledger, session_id, leaf_id)

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        return await self._hop(super().live_ledger, session_id, leaf_id)

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap:
        return await self._hop(super().scope_map, session_id, leaf_id)

    async def search(
        self,
        session_id: str,
        query: str,
        *,
        limit: int = 10,
        kinds: Iterable[SearchKind] | None = None,
        leaf_id: str | None = None,
        include_inactive: bool = False,
        invalidated_ids: Iterable[str] | None = None,
        secrets: Iterable[str] | Redactor | None = None,
    ) -> builtins.list[SearchHit]:
        """The whole search in one hop (its leaf, index reads, memory rows and ranking, in
        one read transaction): a search ran six to eight statements, each its own hop.
        The first search to reach messages the index lacks indexes them first, off the
        thread (``_search_index_ready``), then runs as before."""
        # The search may run twice (see below): an iterator given for a set of values
        # is read once, here, so that the second run sees what the first did (a secret
        # left out of the redaction would be shown).
        read = functools.partial(
            super().search,
            session_id,
            query,
            limit=limit,
            kinds=_replayable(kinds),
            leaf_id=leaf_id,
            include_inactive=include_inactive,
            invalidated_ids=_replayable(invalidated_ids),
            secrets=_replayable(secrets),
        )
        try:
            return await self._hop(read)
        except _IndexFirst:
            return await read()

    async def _search_index_ready(self, session_id: str, position: LeafPosition) -> bool:
        if self._direct.conn is None:
            return await super()._search_index_ready(session_id, position)
        pending = await self._fetch(PENDING_SEGMENTS_SQL, position.params())
        if pending and not self._read_only:
            raise _IndexFirst  # indexing waits on the writer: not on the reader's thread
        return not pending  # a read-only store scans the branch instead

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        wanted = check_id_list(memory_ids, "memory_ids", memory=True)
        read = functools.partial(super().memory_subset, session_id, wanted, leaf_id)
        # Rows by memory id: a point read while narrow (see get_many).
        return await self._read_point(read, len(wanted))

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        return await self._hop(super().last_compaction, session_id, leaf_id)

    async def marked_data(
        self, session_id: str, custom_type: str, leaf_id: str | None = None
    ) -> builtins.list[MarkedData]:
        # The leaf, the rows and their parse in one hop, the parse off the event loop.
        return await self._hop(super().marked_data, session_id, custom_type, leaf_id)

    async def snapshot(
        self,
        session_id: str,
        *,
        recent: int = 8,
        leaf_id: str | None = None,
        full: bool = False,
    ) -> BranchSnapshot:
        """Every read of the snapshot in one hop to the reader's thread."""
        read = functools.partial(
            super().snapshot, session_id, recent=recent, leaf_id=leaf_id, full=full
        )
        return await self._hop(read)

    async def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """On the loop's own connection when the page is narrow (``loop_page``): no hop;
        a wide page, a branch of many forks or a busy file take the hop."""
        check_entry_id(cursor, "cursor")
        check_page_args(limit, direction)
        check_leaf_id(leaf_id)
        session_id = self._session(session_id)
        forward = direction == "forward"
        # A payload body: the short row (page.ENTRY_PART_ROWS_SQL).
        rows_sql = ENTRY_PART_ROWS_SQL[forward]
        rows = self._point_page_rows(session_id, cursor, limit, direction, leaf_id, rows_sql)
        if rows is None:
            return await self._hop(
                super().page_messages, session_id, cursor, limit, direction, leaf_id
            )
        # The whole entry rows (_rows.entry_columns) they stand for.
        rows = [(row[0], session_id, row[3], "message", row[1], row[2], row[4]) for row in rows]
        return self._entries_page(rows, limit, direction)

    async def page_message_parts(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[MessagePart], bool]:
        check_entry_id(cursor, "cursor")
        check_page_args(limit, direction)
        check_leaf_id(leaf_id)
        session_id = self._session(session_id)
        page = self._point_page_parts(session_id, cursor, limit, direction, leaf_id)
        if page is None:
            return await self._hop(
                super().page_message_parts, session_id, cursor, limit, direction, leaf_id
            )
        return page

    def _point_page_parts(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"],
        leaf_id: str | None,
    ) -> tuple[builtins.list[MessagePart], bool] | None:
        """``page_message_parts`` of arguments already checked (the session id valid, the
        limit and direction ``check_page_args``' own), on the loop's connection, in plain
        calls; None when only the hop can serve it. The public page calls it directly, so
        its arguments are checked once, by the public function."""
        rows_sql = PIECE_ROWS_SQL[direction == "forward", True]
        rows = self._point_page_rows(session_id, cursor, limit, direction, leaf_id, rows_sql)
        return None if rows is None else self._parts_page(rows, limit, direction)

    def _point_page_rows(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"],
        leaf_id: str | None,
        rows_sql: str,
    ) -> builtins.list[Any] | None:
        """``_page_rows`` of checked arguments, read in one snapshot of the loop's own
        connection (``loop_page``) by ``rows_sql`` (see ``point_page_start``), or None: a
        wide page, a branch of many forks, a busy file or no point connection here take
        the hop."""
        if limit >= POINT_MAX_PARAMS or not self._point_ready():
            return None
        point = self._point
        want = limit + 1  # one more tells whether another page follows
        forward = direction == "forward"
        try:
            with point.snapshot():
                head, pieces, rows = point_page_start(
                    point, session_id, leaf_id, cursor, want, forward, rows_sql
                )
                check_page_head(
                    session_id=session_id, leaf_id=leaf_id, cursor=cursor, head=head, url=self.url
                )
                depth = head[2]
                assert depth is not None  # check_page_head refuses a cursor off the branch
                if len(rows) < want:
                    # The cursor's piece ran out: the pieces beyond it, in page order.
                    for segment_id, lo, hi in pieces_beyond(pieces, depth, forward):
                        params = (segment_id, lo, hi, *ELIGIBLE_ROLES, want - len(rows))
                        rows.extend(point.fetch(rows_sql, params))
                        if len(rows) >= want:
                            break
        except NotAPoint:
            return None
        return rows
