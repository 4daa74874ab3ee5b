"""Every read of ``SessionStore`` in SQL, once for both engines: tree, branch and memory,
from the indexes and the fold tables.

``SqlReads`` runs each statement through ``_fetch`` on the store's reader (a
``connection.SqlReader``); an engine says how a statement runs (``_read_rows``: SQLite
retries a busy file), how a page is read (``_page_rows``: each engine has its own one
statement) and what damage leaves behind (``_mark_damaged``).
"""

from __future__ import annotations

import abc
import builtins
import operator
from collections.abc import Iterable, Sequence
from typing import Any, Literal, TypeVar

from pydantic_core import from_json

from ..._gc import collector_paused
from ...core.branch_snapshot import BranchSnapshot
from ...core.ledger import ObservationalMemoryLedger
from ...core.redaction import Redactor
from ...core.scope_map import WorkScopeMap, fold_work_scope_map
from ...entries import SessionEntry, validate_session_id
from ...errors import (
    CorruptStoreError,
    EntryNotFoundError,
    StoreError,
)
from ...tokens import TokenEstimator
from .._rows import bad_row_reason, entries_from_rows, message_parts
from ..arguments import (
    check_count,
    check_custom_type,
    check_entry_id,
    check_id_list,
    check_leaf_id,
)
from ..base import (
    ErasureReport,
    MarkedData,
    MessagePart,
    SessionSummary,
    StoreLifecycle,
)
from ..search import (
    SEARCH_CANDIDATES_PER_TERM,
    MessageCandidate,
    SearchHit,
    SearchKind,
    check_search,
    run_search,
    scan_message_candidates,
    shown_keys,
)
from ..snapshot import read_branch_snapshot
from .connection import Params, SqlReader
from .damage import first_line, fold_rows_parse
from .live_pool import POOL_SQL
from .memory_folds import ledger_from_rows
from .placement import (
    check_leaf_session,
    id_chunks,
    memory_head_of,
    sorted_pieces,
)
from .search_index import (
    PENDING_SEGMENTS_SQL,
    memory_candidate_ids,
    message_candidate_rows,
)
from .statements import (
    BODIES_BY_ID_SQL,
    BRANCH_DEPTH_COLUMN,
    BRANCH_ENTRIES_SQL,
    BRANCH_PIECES_SQL,
    BRANCH_TOKENS_SQL,
    DEPTH_ON_BRANCH_SQL,
    ELIGIBLE_ROLES,
    ENTRY_COLUMNS,
    LAST_COMPACTION_SQL,
    LEAF_BY_ID_SQL,
    LEAF_BY_SESSION_SQL,
    LEAVES_SQL,
    LEDGER_SQL,
    LIVE_OBSERVATIONS_SQL,
    LIVE_REFLECTIONS_SQL,
    LOOKUP_CHUNK,
    MARKED_DATA_SQL,
    MEMORY_SUBSET_WITH_SUPERSESSIONS_AT_LEAF_SQL,
    MEMORY_SUBSET_WITH_SUPERSESSIONS_SQL,
    RECENT_MESSAGES_SQL,
    SCOPE_RECORDS_SQL,
    SUMMARIES_SQL,
    SUPERSESSIONS_SQL,
    LeafPosition,
)

_T = TypeVar("_T")

_DEPTH = operator.itemgetter(BRANCH_DEPTH_COLUMN)
_FIRST = operator.itemgetter(0)


def _json_array(texts: builtins.list[Any]) -> builtins.list[Any]:
    """JSON texts parsed as one array, in one call: SQLite hands a cast column back as
    bytes, PostgreSQL's text column as str. pydantic-core's parser (Rust) builds the same
    objects as ``json.loads`` in 40-50% of its time, and in less with its cache of keys,
    which payloads of one record type repeat (10,000 SDK items, with the collector off:
    1.4 MB of item data 11.4 ms with json.loads, 10.5 uncached, 5.7 caching keys; their
    5.1 MB of messages 9.4, 5.3 and 3.7 ms)."""
    if not texts:
        return []
    joined: str | bytes
    if isinstance(texts[0], str):
        joined = "[" + ",".join(texts) + "]"
    else:
        joined = b"[" + b",".join(texts) + b"]"
    found: builtins.list[Any] = from_json(joined, cache_strings="keys")
    if len(found) != len(texts):
        raise ValueError("a payload holds more than one JSON value")
    return found


class SqlReads(StoreLifecycle):
    """Every read of ``SessionStore``, from indexes and the memory fold tables.

    An engine's store adds opening and writing; this half holds the connection state both
    halves read, so that a read meeting a damaged store refuses later writes too.
    """

    _reader: SqlReader
    _estimator: TokenEstimator
    _read_only: bool
    # Why writes are refused, once a read or write met a damaged file (or a note says so).
    _damaged: str | None

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return None
        return await memory_head_of(position, self._fetch)

    async def get(self, entry_id: str) -> SessionEntry | None:
        check_entry_id(entry_id)
        rows = await self._fetch(f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?", (entry_id,))
        return self._parse(rows[0]) if rows else None

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist, in one query per 500 ids."""
        found: dict[str, SessionEntry] = {}
        for chunk in id_chunks(sorted(set(check_id_list(entry_ids, "entry_ids")))):
            sql = BODIES_BY_ID_SQL.format(marks=", ".join("?" * len(chunk)))
            for entry in self._parse_rows(await self._fetch(sql, chunk)):
                found[entry.id] = entry
        return found

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        rows = await self._fetch(
            f"SELECT {ENTRY_COLUMNS} FROM entries WHERE session_id = ? ORDER BY seq",
            (self._session(session_id),),
        )
        with collector_paused():
            return self._parse_rows(rows)

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return []
        return await self._branch_range(position, 0, position.depth)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        return [row[0] for row in await self._fetch(LEAVES_SQL, (self._session(session_id),))]

    async def leaf(self, session_id: str) -> str | None:
        rows = await self._fetch(
            "SELECT leaf_id FROM sessions WHERE session_id = ?", (self._session(session_id),)
        )
        return str(rows[0][0]) if rows else None

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        check_entry_id(entry_id)
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return False
        return await self._depth_on_branch(position, entry_id) is not None

    async def sessions(self) -> builtins.list[str]:
        return [row[0] for row in await self._fetch("SELECT session_id FROM sessions ORDER BY seq")]

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        """Every session's summary, in order of creation, from the summary table.

        Costs one row per session, whatever the sessions hold.
        """
        self._check_open()
        rows = await self._fetch(SUMMARIES_SQL)
        summaries = []
        for session_id, entries, messages, leaves, last_activity, found in rows:
            if found is None:
                raise CorruptStoreError(
                    f"session {session_id!r} in {self.url} has no row in session_summary",
                    url=self.url,
                )
            summaries.append(
                SessionSummary(session_id, int(entries), int(messages), int(leaves), last_activity)
            )
        return summaries

    # -- more reads over the indexed path ---------------------------------------------

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        """Number of entries on the branch to ``leaf_id`` (default: the current leaf)."""
        position = await self._leaf_position(session_id, leaf_id)
        return 0 if position is None else position.depth + 1

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int:
        """Sum of the token counts of the message entries on the branch.

        Counts made at append with the store's encoding are summed as stored (for a path
        counted with one encoding, the leaf row already holds the sum); an entry counted
        with another encoding is recounted, without rewriting its row.
        """
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return 0
        encoding = self._estimator.name
        if position.path_tokens is not None and position.token_encoding == encoding:
            return position.path_tokens
        rows = await self._fetch(BRANCH_TOKENS_SQL, {**position.params(), "encoding": encoding})
        total = 0
        for tokens, row_encoding, *row in rows:
            if row_encoding == encoding:
                total += int(tokens)
            else:
                total += self._estimator.count_entry(self._parse(row))
        return total

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """Branch entries strictly after ``after_id`` (all when None), root side first.

        ``EntryNotFoundError`` when ``after_id`` is not on the branch. One indexed range
        read: the cost follows the entries returned, not the branch before the cursor.
        """
        check_leaf_id(after_id, "after_id")
        position = await self._leaf_position(session_id, leaf_id)
        if after_id is None:
            return [] if position is None else await self._branch_range(position, 0, position.depth)
        depth = None if position is None else await self._depth_on_branch(position, after_id)
        if position is None or depth is None:
            raise EntryNotFoundError(
                f"entry {after_id!r} is not on the branch",
                entry_id=after_id,
                session_id=session_id,
                url=self.url,
            )
        return await self._branch_range(position, depth + 1, position.depth)

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The branch's last ``count`` user/assistant/tool messages, oldest first.

        Reads the pieces from the leaf back, newest first, and stops at ``count``. The
        leaf's own piece comes first, before the branch's pieces are looked up: a segment
        is one chain, so its entries down to the leaf's depth are on the branch, and when
        they hold ``count`` messages (the usual case) the pieces are never read.
        """
        count = check_count(count)
        position = await self._leaf_position(session_id, leaf_id)
        if position is None or count <= 0:
            return []
        params = (position.segment_id, 0, position.depth, *ELIGIBLE_ROLES, count)
        found = self._parse_rows(await self._fetch(RECENT_MESSAGES_SQL, params))
        if len(found) < count:
            for segment_id, lo, hi in reversed(await self._pieces(position)):
                if segment_id == position.segment_id:
                    continue  # read above
                params = (segment_id, lo, hi, *ELIGIBLE_ROLES, count - len(found))
                found.extend(self._parse_rows(await self._fetch(RECENT_MESSAGES_SQL, params)))
                if len(found) >= count:
                    break
        found.reverse()
        return found

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger, rebuilt from the fold tables: cost follows the memory."""
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return ObservationalMemoryLedger()
        params = position.params()
        rows = [await self._fetch(sql, params) for sql in LEDGER_SQL.values()]
        supersessions = await self._fetch(SUPERSESSIONS_SQL, params)
        with fold_rows_parse(self.url, session_id), collector_paused():
            observations, reflections, drops, markers = rows
            return ledger_from_rows(observations, reflections, drops, markers, supersessions)

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger without its dropped observations and superseded reflections: what a
        turn's context needs.

        Dropped observations and superseded reflections are skipped inside SQLite (an
        anti-join on the memory_id indexes), so only memory still active comes back and
        is parsed: the cost follows the active memory, which the dropper and the
        reflection budget keep within their caps, not everything ever recorded.
        """
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return ObservationalMemoryLedger()
        params = position.params()
        # The leaf's segment keeps its live memory (live_pool.py): read only that.
        pooled = [await self._fetch(sql, params) for sql in POOL_SQL.values()]
        if pooled[2]:
            with fold_rows_parse(self.url, session_id), collector_paused():
                return ledger_from_rows(pooled[0], pooled[1], [], pooled[2])
        observations = await self._fetch(LIVE_OBSERVATIONS_SQL, params)
        reflections = await self._fetch(LIVE_REFLECTIONS_SQL, params)
        markers = await self._fetch(LEDGER_SQL["markers"], params)
        with fold_rows_parse(self.url, session_id), collector_paused():
            return ledger_from_rows(observations, reflections, [], markers)

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
        """``SessionStore.search``, its candidates read from the search index:
        one index range search per branch piece and query key (``search_index.py``), so
        the cost follows the matches on the branch. A message's rows are written by the
        first search that reaches it (``_search_index_ready``); a store that cannot write
        scans the branch's messages instead."""
        self._check_open()
        session_id = validate_session_id(session_id, field="session_id")
        leaf_id = check_leaf_id(leaf_id)
        q = check_search(
            query,
            limit=limit,
            kinds=kinds,
            include_inactive=include_inactive,
            invalidated_ids=invalidated_ids,
            secrets=secrets,
        )

        red = q.redactor

        def shown(rows: builtins.list[Any]) -> builtins.list[frozenset[int]]:
            # A row with no message cannot be an indexed message; it shows no key.
            return [
                shown_keys(e.message, red) if e.message else frozenset()
                for e in self._parse_rows(rows)
            ]

        visible = shown if red else None

        async def messages(leaf: str, keys: frozenset[int]) -> builtins.list[MessageCandidate]:
            position = await self._leaf_position(session_id, leaf)
            if position is None:
                return []
            if not await self._search_index_ready(session_id, position):
                branch = await self._branch_range(position, 0, position.depth)
                return scan_message_candidates(branch, keys, red=q.redactor)
            rows = await message_candidate_rows(
                self._fetch, position.params(), keys, SEARCH_CANDIDATES_PER_TERM, visible
            )
            return [(e.id, e.timestamp, e.message) for e in self._parse_rows(rows) if e.message]

        async def memory(leaf: str, keys: frozenset[int]) -> builtins.set[str] | None:
            position = await self._leaf_position(session_id, leaf)
            if position is None:
                return set()
            return await memory_candidate_ids(self._fetch, position.params(), keys)

        return await run_search(
            self,  # type: ignore[arg-type]  # the reads of SessionStore it calls are here
            session_id,
            leaf_id,
            q,
            messages,
            memory,
        )

    async def _search_index_ready(self, session_id: str, position: LeafPosition) -> bool:
        """Whether the index holds every message of the branch, after indexing those it
        lacked (``search_index.py``: the append leaves messages to the first search).
        False on a store that cannot write them: its search scans the branch instead."""
        pending = [row[0] for row in await self._fetch(PENDING_SEGMENTS_SQL, position.params())]
        if not pending:
            return True
        if self._read_only:
            return False
        await self._index_for_search(session_id, pending)
        return True

    @abc.abstractmethod
    async def _index_for_search(self, session_id: str, segment_ids: Sequence[int]) -> None:
        """Write the index rows of ``segment_ids``' pending messages
        (``search_index.index_pending_messages``) in the store's own write transaction,
        under its writer's lock: SQLite's and PostgreSQL's differ."""

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap:
        """The branch's scope map, folded from its om.scope.* records only."""
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return fold_work_scope_map([])
        rows = await self._fetch(SCOPE_RECORDS_SQL, position.params())
        return fold_work_scope_map(self._parse_rows([row[1:] for row in rows]))

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger restricted to ``memory_ids``: one query by memory id, filtered to
        the branch, so exact-id recall costs the same at any transcript length; more
        than ``LOOKUP_CHUNK`` ids take one query per chunk of them, on one branch end."""
        wanted = sorted(set(check_id_list(memory_ids, "memory_ids", memory=True)))
        check_leaf_id(leaf_id)
        if not wanted:
            self._session(session_id)
            return ObservationalMemoryLedger()
        current = MEMORY_SUBSET_WITH_SUPERSESSIONS_AT_LEAF_SQL
        given, parts = MEMORY_SUBSET_WITH_SUPERSESSIONS_SQL, 4
        if leaf_id is None and len(wanted) <= LOOKUP_CHUNK:
            # The session's leaf is looked up inside the same query: one round trip.
            sql = current.format(marks=", ".join("?" * len(wanted)))
            rows = await self._fetch(sql, [self._session(session_id), *(wanted * parts)])
        else:
            # Each chunk reads the branch to the one end resolved here, whatever is
            # appended meanwhile; a chunk stays within SQLite's bound on parameters.
            position = await self._leaf_position(session_id, leaf_id)
            if position is None:
                return ObservationalMemoryLedger()
            rows = []
            for chunk in id_chunks(wanted):
                sql = given.format(marks=", ".join("?" * len(chunk)))
                params = [position.segment_id, position.depth, *(chunk * parts)]
                rows += await self._fetch(sql, params)
        observations, reflections, drops, supersessions = [], [], [], []
        for kind, depth, ordinal, memory_id, entry_id, recorded_at, body in rows:
            if kind == 0:
                observations.append((depth, ordinal, memory_id, entry_id, recorded_at, body))
            elif kind == 1:
                reflections.append((depth, ordinal, memory_id, entry_id, recorded_at, body))
            elif kind == 2:
                drops.append((depth, ordinal, memory_id))
            else:
                # entry_id's column holds the superseding reflection here.
                supersessions.append((depth, ordinal, memory_id, entry_id))
        with fold_rows_parse(self.url, session_id):
            return ledger_from_rows(
                sorted(observations), sorted(reflections), sorted(drops), [], supersessions
            )

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The latest compaction entry on the branch, from the marker rows: O(pieces)."""
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return None
        for segment_id, lo, hi in reversed(await self._pieces(position)):
            rows = await self._fetch(LAST_COMPACTION_SQL, (segment_id, lo, hi))
            if rows:
                return await self.get(rows[0][0])
        return None

    async def marked_data(
        self, session_id: str, custom_type: str, leaf_id: str | None = None
    ) -> builtins.list[MarkedData]:
        """The payload columns of the branch's rows of one record type, parsed in one call.

        No entry is built: the rows were validated at append, a custom entry's ``body`` is
        exactly its ``data``, and a message entry's ``data`` column and ``body`` are its
        data and its message's wire JSON (``stores/_rows.py``).
        """
        check_custom_type(custom_type)
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return []
        params = {**position.params(0, position.depth), "custom_type": custom_type}
        with collector_paused():
            rows = await self._fetch(MARKED_DATA_SQL, params)
            rows.sort(key=_FIRST)
            try:
                # (depth, data, body): a custom entry's data is its body, a message
                # entry's is its data column, and its body the message.
                found = _json_array([row[2] if row[1] is None else row[1] for row in rows])
                messages = _json_array([row[2] for row in rows if row[1] is not None])
                if not all(isinstance(data, dict) for data in found) or not all(
                    isinstance(message, dict) for message in messages
                ):
                    raise ValueError("a payload is not a JSON object")
            except ValueError as exc:
                error = CorruptStoreError(
                    f"{self.url}: a {custom_type!r} entry of session {session_id!r} "
                    f"does not read back: {exc}",
                    session_id=session_id,
                    url=self.url,
                )
                self._mark_damaged(error)
                raise error from None
            next_message = iter(messages).__next__
            new = tuple.__new__  # MarkedData's own __new__ is a Python call per row
            return [
                new(MarkedData, (data, None if row[1] is None else next_message()))
                for row, data in zip(rows, found, strict=True)
            ]

    async def damaged_sessions(self) -> dict[str, StoreError]:
        """None: a SQL store's damage is the whole file's (``prism-om check``)."""
        self._check_open()
        return {}

    async def erasure_report(self) -> ErasureReport:
        """Nothing left by default; ``SqliteStore`` and ``PostgresStore`` say what is."""
        return ErasureReport()

    # ``memory_with_sources`` is each engine's one statement (SqliteReads, PostgresReads).

    async def snapshot(
        self,
        session_id: str,
        *,
        recent: int = 8,
        leaf_id: str | None = None,
        full: bool = False,
    ) -> BranchSnapshot:
        """The branch's memory state at one leaf (``stores.snapshot``), from these reads."""
        return await read_branch_snapshot(
            self, session_id, recent, leaf_id, full, self._estimator.name
        )

    async def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """Up to ``limit`` eligible messages after/before ``cursor``: indexed, O(page).

        One statement (``page_statement.PAGE_SQL``) reads the leaf, the cursor, the branch pieces
        and the rows of the cursor's piece; a page that crosses a fork reads the rest
        piece by piece.
        """
        rows = await self._page_rows(session_id, cursor, limit, direction, leaf_id, False)
        return self._entries_page(rows, limit, direction)

    async def page_message_parts(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[MessagePart], bool]:
        """``page_messages`` as ``(id, timestamp, message)`` parts (``base.MessagePart``):
        the same rows, checks and errors, without an entry built per row."""
        rows = await self._page_rows(session_id, cursor, limit, direction, leaf_id, True)
        return self._parts_page(rows, limit, direction)

    def _entries_page(
        self, rows: builtins.list[Any], limit: int, direction: str
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """The page of entries of ``_page_rows``' rows."""
        return self._page_of(self._parse_rows(rows), limit, direction)

    def _parts_page(
        self, rows: builtins.list[Any], limit: int, direction: str
    ) -> tuple[builtins.list[MessagePart], bool]:
        """The page of message parts of ``_page_rows``' part rows (``_rows.PART_COLUMNS``)."""
        try:
            found = message_parts(rows)
        except CorruptStoreError as exc:
            raise self._store_named(exc) from exc
        return self._page_of(found, limit, direction)

    @staticmethod
    def _page_of(
        found: builtins.list[_T], limit: int, direction: str
    ) -> tuple[builtins.list[_T], bool]:
        """The page of ``found`` (page order, one more than ``limit`` when more follow)."""
        more = len(found) > limit
        page = found[:limit]
        if direction != "forward":
            page.reverse()
        return page, more

    @abc.abstractmethod
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
        checked first (``placement.check_page_head``), in the engine's own statement."""

    # -- helpers later features reuse -------------------------------------------------

    async def _leaf_position(self, session_id: str, leaf_id: str | None) -> LeafPosition | None:
        """The branch end: ``leaf_id`` checked against the session, or the current leaf.

        None when ``leaf_id`` is None and the session is unknown; ``EntryNotFoundError``
        or ``SessionMismatchError`` for a ``leaf_id`` that is not the session's.
        """
        check_leaf_id(leaf_id)
        session_id = self._session(session_id)
        if leaf_id is None:
            rows = await self._fetch(LEAF_BY_SESSION_SQL, (session_id,))
            if not rows:
                return None
            current, segment_id, depth, path_tokens, encoding = rows[0]
            if segment_id is None:
                raise CorruptStoreError(
                    f"session {session_id!r} in {self.url}: its leaf {current!r} has no row",
                    url=self.url,
                )
            return LeafPosition(current, segment_id, depth, path_tokens, encoding)
        rows = await self._fetch(LEAF_BY_ID_SQL, (leaf_id,))
        check_leaf_session(leaf_id, session_id, rows[0][0] if rows else None, self.url)
        _, segment_id, depth, path_tokens, encoding = rows[0]
        return LeafPosition(leaf_id, segment_id, depth, path_tokens, encoding)

    async def _pieces(self, position: LeafPosition) -> builtins.list[tuple[int, int, int]]:
        return sorted_pieces(await self._fetch(BRANCH_PIECES_SQL, position.params()))

    async def _depth_on_branch(self, position: LeafPosition, entry_id: str) -> int | None:
        """The depth of ``entry_id`` if it lies on the branch ending at ``position``."""
        params = {**position.params(), "entry_id": entry_id}
        rows = await self._fetch(DEPTH_ON_BRANCH_SQL, params)
        return int(rows[0][0]) if rows else None

    async def _branch_range(
        self, position: LeafPosition, first_depth: int, last_depth: int
    ) -> builtins.list[SessionEntry]:
        """The entries of the branch at depths ``first_depth..last_depth``, root first.

        A branch holds exactly one entry per depth, so this is also how to page it.
        """
        first, last = max(first_depth, 0), min(last_depth, position.depth)
        if first > last:
            return []
        # The collector stays paused over the fetch too: its rows are as many new
        # acyclic tuples as the parse builds entries, and a collection run in their
        # midst finds no garbage, only a long walk over the live heap (see _gc.py). On
        # PostgreSQL the fetch awaits the server, and other tasks run meanwhile with the
        # collector paused: that only postpones their collections, nothing is lost.
        with collector_paused():
            rows = await self._fetch(BRANCH_ENTRIES_SQL, position.params(first, last))
            # The pieces come leaf side first; the depth is the row's last column.
            rows.sort(key=_DEPTH)
            # Every depth once, in order (checked in C: a damaged index could repeat one).
            if list(map(_DEPTH, rows)) == list(range(first, last + 1)):
                entries = self._parse_rows(rows)
                # Freed before the collector resumes, so its next pass has fewer to walk.
                del rows
                return entries
        found = {row[BRANCH_DEPTH_COLUMN] for row in rows}
        missing = next((depth for depth in range(first, last + 1) if depth not in found), None)
        # Every depth there, yet not once each: the (segment_id, depth) index is damaged.
        what = (
            "more than one entry at a depth" if missing is None else f"no entry at depth {missing}"
        )
        raise CorruptStoreError(
            f"{self.url}: the branch to {position.entry_id!r} has {what}", url=self.url
        )

    async def _fetch(self, sql: str, params: Params = ()) -> builtins.list[Any]:
        """All rows of one read on the reader connection, errors translated."""
        reader = await self._started_reader()
        try:
            rows = await self._read_rows(reader, sql, params)
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise
        return builtins.list(rows)

    async def _read_rows(self, reader: SqlReader, sql: str, params: Params) -> Iterable[Any]:
        """One statement's rows on ``reader``, errors already translated by the engine."""
        return await reader.execute_fetchall(sql, params)

    def _parse(self, row: Sequence[Any]) -> SessionEntry:
        """One stored entry row (``ENTRY_COLUMNS``) back into its entry, or raise
        ``CorruptStoreError``."""
        (entry,) = self._parse_rows([row])
        return entry

    def _parse_rows(self, rows: Sequence[Sequence[Any]]) -> builtins.list[SessionEntry]:
        """Stored entry rows back into their entries (``stores/_rows.py``), built from the
        columns and the payloads."""
        try:
            return entries_from_rows(rows)
        except CorruptStoreError as exc:
            raise self._store_named(exc) from exc

    def _store_named(self, exc: CorruptStoreError) -> CorruptStoreError:
        """``bad_row``'s error with this store named."""
        return CorruptStoreError(
            f"entry {exc.entry_id!r} in {self.url}: {bad_row_reason(exc)}",
            entry_id=exc.entry_id,
            url=self.url,
        )

    def _session(self, session_id: str) -> str:
        """Check the store is open, then that ``session_id`` is a valid name."""
        self._check_open()
        return validate_session_id(session_id)

    def _open_reader(self) -> SqlReader:
        self._check_open()
        return self._reader

    async def _started_reader(self) -> SqlReader:
        """The reader, ready for statements (``SqliteStore`` may open it on first use)."""
        return self._open_reader()

    def _mark_damaged(self, exc: CorruptStoreError) -> None:
        """Refuse later writes on this store object (SQLite also leaves a note)."""
        if self._read_only or self._damaged is not None:
            return
        self._damaged = first_line(exc)
