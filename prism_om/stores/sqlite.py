"""The SQLite adapter: session trees in one file, branch paths as indexed range queries.

Durability: the file runs in WAL mode. ``synchronous="NORMAL"`` (the default) keeps every
committed append through an application crash (a killed process); ``"FULL"`` also keeps
it through an operating-system crash or power loss, at the cost of an fsync per commit.

Concurrency: one writer connection, guarded by an ``asyncio.Lock`` held across each whole
transaction, because aiosqlite runs every coroutine's statements on one connection and so
in one transaction; every write transaction starts with ``BEGIN IMMEDIATE`` so that two
processes queue for the write lock instead of failing half-way. Reads use their own
connection and see the last committed state. A write lock held by another process past
``busy_timeout_ms`` is retried a few times with a short backoff, then raises
``StoreBusyError``. Every ``sqlite3`` error is translated at this boundary.

Branch paths: see ``schema.sql``. Each entry has a depth and a segment (a chain of first
children), so a branch is one (segment, depth range) piece per fork on it. The pieces come
from the small ``segments`` table by a recursive query; the entries of a piece come from
the ``(segment_id, depth)`` index. Nothing walks parent pointers one entry at a time.

Appends check everything ``MemoryStore`` checks, in the same order and with the same
errors, inside the write transaction: the tree rules, then ``om.*`` memory records with
the shared validation of ``observational_memory.validation``, reading only the entries a
record names and the memory records on its branch.

Read-only opens (``read_only=True``) never create or change the file: the connection is
opened ``mode=ro``. A file in WAL mode needs its shared-memory file (``-shm``) for that;
where it cannot be created (a read-only directory) and no committed writes wait in the WAL,
the file is opened ``immutable=1`` instead, and such a reader does not see writes other
processes make while it is open.

Damage: a write that meets a corruption error marks the store damaged, in the process and
in a ``<file>-damaged`` note next to it, and every later write, in any process, refuses
with ``CorruptStoreError`` until the file is repaired (``prism-om check``) and the note
removed. Reads go on, so the readable sessions can be copied out.

Schema versions: a file of an older ``user_version`` is migrated in place, in one
transaction, when it is opened for writing (``MIGRATIONS``); a read-only open leaves it
as it is and answers the reads the old shape allows. A newer version refuses to open.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import os
import random
import resource
import sqlite3
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NamedTuple, Self, TypeVar

import aiosqlite
from pydantic import ValidationError

from .._gc import collector_paused
from ..core.ledger import ObservationalMemoryLedger
from ..core.scope_map import WorkScopeMap, fold_work_scope_map
from ..core.sources import ELIGIBLE_SOURCE_ROLES
from ..core.validation import (
    MemoryRecordNeeds,
    branch_facts_from_entries,
    memory_record_needs,
    validate_memory_record,
)
from ..entries import SessionEntry, now_timestamp, validate_session_id
from ..errors import (
    CorruptStoreError,
    DuplicateEntryError,
    EntryNotFoundError,
    InvalidInputError,
    MemoryRecordError,
    ReadOnlyStoreError,
    RootExistsError,
    SessionMismatchError,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    StoreNotFoundError,
    StoreRuleError,
    UnknownParentError,
)
from ..tokens import TokenEstimator, get_estimator
from ._derived import BranchDerivedReads
from ._schema import APPLICATION_ID, SCHEMA_VERSION, Schema, load_schema
from ._shield import finish_then_cancel
from ._sqlite_memory import (
    COMPACTION_MARKER,
    fold_rows,
    ledger_from_rows,
    ledger_queries,
    scope_records_query,
    undated_sources,
    write_fold_rows,
)
from ._summary import latest_timestamp, utc_timestamp
from .base import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    SessionSummary,
    chain_at_leaf,
    check_batch_shape,
    check_memory_head,
    check_page_args,
)

__all__ = ["DAMAGED_SUFFIX", "MIGRATIONS", "SqliteStore"]

T = TypeVar("T")
Params = Sequence[Any] | Mapping[str, Any]

SYNCHRONOUS_MODES = frozenset({"NORMAL", "FULL", "EXTRA"})
# After SQLite's own busy_timeout wait: this many attempts in all, with a short backoff.
BUSY_ATTEMPTS = 4
BUSY_BACKOFF_S = 0.05
# Batches this large are serialised and counted off the event loop.
ENCODE_IN_THREAD = 1000
# Ids per "IN (...)" lookup, well under SQLite's bound-parameter limit.
LOOKUP_CHUNK = 500

# The pieces of the branch ending at the entry at (:leaf_segment, :leaf_depth): one row
# (segment_id, lo, hi) per segment on the path, leaf first. Each step up costs one primary
# key lookup in ``segments``; the recursion ends at the root segment, or once the piece
# reaches :min_depth, as shallower pieces cannot hold the rows a caller asks for.
BRANCH_PATH_CTE = """
WITH RECURSIVE branch_path(segment_id, lo, hi, parent_segment_id) AS (
    SELECT s.segment_id, s.start_depth, :leaf_depth, s.parent_segment_id
    FROM segments s WHERE s.segment_id = :leaf_segment
    UNION ALL
    SELECT s.segment_id, s.start_depth, bp.lo - 1, s.parent_segment_id
    FROM branch_path bp JOIN segments s ON s.segment_id = bp.parent_segment_id
    WHERE bp.lo > :min_depth
)"""


def branch_rows_sql(columns: str, table: str, alias: str, where: str = "") -> str:
    """SQL selecting ``columns`` from the rows of ``table`` that lie on one branch.

    ``table`` needs ``segment_id`` and ``depth`` columns (an entry's, or those of the entry
    that recorded a fold row) and an index on ``(segment_id, depth)``. Bind
    ``:leaf_segment`` and ``:leaf_depth`` (a ``LeafPosition``), and ``:min_depth`` /
    ``:max_depth`` to restrict the depth range (0 and the leaf's depth for all of it).
    ``CROSS JOIN`` makes SQLite loop over the few pieces and search the index for each,
    whatever its statistics say.
    """
    extra = f" AND ({where})" if where else ""
    return (
        f"{BRANCH_PATH_CTE}\nSELECT {columns} FROM branch_path bp CROSS JOIN {table} {alias}\n"
        f"WHERE {alias}.segment_id = bp.segment_id\n"
        f"  AND {alias}.depth BETWEEN max(bp.lo, :min_depth) AND min(bp.hi, :max_depth)"
        f"{extra}"
    )


_BRANCH_ENTRIES_SQL = branch_rows_sql("e.depth, e.id, CAST(e.body AS BLOB)", "entries", "e")
_BRANCH_PIECES_SQL = f"{BRANCH_PATH_CTE}\nSELECT segment_id, lo, hi FROM branch_path"
# Segments belong to one session, so a row on the pieces is of the leaf's session.
_DEPTH_ON_BRANCH_SQL = f"""{BRANCH_PATH_CTE}
SELECT e.depth FROM entries e CROSS JOIN branch_path bp
WHERE e.id = :entry_id AND bp.segment_id = e.segment_id AND e.depth BETWEEN bp.lo AND bp.hi"""
# The same test, also answering what the cursor of a page is.
_CURSOR_ON_BRANCH_SQL = _DEPTH_ON_BRANCH_SQL.replace(
    "SELECT e.depth ", "SELECT e.depth, e.kind, e.role "
)
_ELIGIBLE_ROLES = tuple(sorted(ELIGIBLE_SOURCE_ROLES))
# Newest first within one piece, straight off the (segment_id, depth) index.
_RECENT_MESSAGES_SQL = f"""
SELECT id, CAST(body AS BLOB) FROM entries
WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND kind = 'message' AND role IN ({", ".join("?" * len(_ELIGIBLE_ROLES))})
ORDER BY depth DESC LIMIT ?"""
# Where a memory id was recorded, any branch: the caller keeps the rows on its path.
_MEMORY_BY_ID_SQL = "SELECT entry_seq, segment_id, depth FROM {table} WHERE memory_id IN ({marks})"
_BODIES_BY_ID_SQL = "SELECT id, CAST(body AS BLOB) FROM entries WHERE id IN ({marks})"
_ENTRIES_BY_SEQ_SQL = "SELECT id, CAST(body AS BLOB) FROM entries WHERE seq IN ({marks})"
_ENTRIES_BY_ID_SQL = """
SELECT id, segment_id, depth, CAST(body AS BLOB) FROM entries WHERE id IN ({marks})"""
_POSITION_SQL = """
SELECT segment_id, depth, path_tokens, token_encoding FROM entries WHERE id = ?"""
_BRANCH_TOKENS_SQL = branch_rows_sql(
    "e.id, e.tokens, e.token_encoding,"
    " CASE WHEN e.token_encoding = :encoding THEN NULL ELSE CAST(e.body AS BLOB) END",
    "entries",
    "e",
    where="e.kind = 'message'",
)
_LEAF_BY_SESSION_SQL = """
SELECT s.leaf_id, e.segment_id, e.depth, e.path_tokens, e.token_encoding
FROM sessions s LEFT JOIN entries e ON e.id = s.leaf_id
WHERE s.session_id = ?"""
_LEAF_BY_ID_SQL = """
SELECT session_id, segment_id, depth, path_tokens, token_encoding FROM entries WHERE id = ?"""
# A segment's tail is exactly an entry without children, so the leaves are the tails.
_LEAVES_SQL = """
SELECT e.id FROM segments s
JOIN entries e ON e.segment_id = s.segment_id
 AND e.depth = (SELECT max(t.depth) FROM entries t WHERE t.segment_id = s.segment_id)
WHERE s.session_id = ?
ORDER BY e.seq"""
_STATE_SQL = """
SELECT (SELECT root_id FROM sessions WHERE session_id = ?),
       (SELECT coalesce(max(seq), 0) FROM sessions),
       (SELECT coalesce(max(seq), 0) FROM entries),
       (SELECT coalesce(max(segment_id), 0) FROM segments)"""
# "Has a child" is "has an entry one deeper in its segment": the first child continues it.
_PARENTS_SQL = """
SELECT p.id, p.session_id, p.segment_id, p.depth, p.path_tokens, p.token_encoding,
       EXISTS (SELECT 1 FROM entries c WHERE c.segment_id = p.segment_id
                                         AND c.depth = p.depth + 1)
FROM entries p WHERE p.id IN ({marks})"""
_INSERT_ENTRY_SQL = """
INSERT INTO entries (seq, id, session_id, parent_id, kind, role, custom_type, timestamp,
                     depth, segment_id, tokens, token_encoding, path_tokens, body)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
# Positions in an entry row as _Placer.place builds it, in the column order above.
_SEQ, _DEPTH, _SEGMENT, _TOKENS = 0, 8, 9, 10
_INSERT_SEGMENT_SQL = """
INSERT INTO segments (segment_id, session_id, parent_segment_id, start_depth)
VALUES (?, ?, ?, ?)"""


_LEDGER_SQL = ledger_queries(branch_rows_sql)
_SCOPE_RECORDS_SQL = scope_records_query(branch_rows_sql)
_LIVE_OBSERVATIONS_SQL = _LEDGER_SQL["observations"]
# Rows of the three memory tables for some memory ids, kept to the branch ending at
# (segment ?, depth ?): the branch pieces come from the small segments table, the rows
# from each table's memory_id index (CROSS JOIN keeps the id lookup as the outer loop, so
# the cost does not grow with the memory on the branch).
_MEMORY_SUBSET_SQL = """
WITH RECURSIVE branch_path(segment_id, lo, hi, parent_segment_id) AS (
    SELECT s.segment_id, s.start_depth, ?2, s.parent_segment_id
    FROM segments s WHERE s.segment_id = ?1
    UNION ALL
    SELECT s.segment_id, s.start_depth, bp.lo - 1, s.parent_segment_id
    FROM branch_path bp JOIN segments s ON s.segment_id = bp.parent_segment_id
)
SELECT 0, o.depth, o.ordinal, o.memory_id, o.entry_id, o.recorded_at, o.body
FROM om_observations o CROSS JOIN branch_path bp
WHERE o.memory_id IN ({marks}) AND o.segment_id = bp.segment_id
  AND o.depth BETWEEN bp.lo AND bp.hi
UNION ALL
SELECT 1, r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body
FROM om_reflections r CROSS JOIN branch_path bp
WHERE r.memory_id IN ({marks}) AND r.segment_id = bp.segment_id
  AND r.depth BETWEEN bp.lo AND bp.hi
UNION ALL
SELECT 2, d.depth, d.ordinal, d.memory_id, NULL, NULL, NULL
FROM om_drops d CROSS JOIN branch_path bp
WHERE d.memory_id IN ({marks}) AND d.segment_id = bp.segment_id
  AND d.depth BETWEEN bp.lo AND bp.hi"""
_MEMORY_SUBSET_AT_LEAF_SQL = _MEMORY_SUBSET_SQL.replace(
    """    SELECT s.segment_id, s.start_depth, ?2, s.parent_segment_id
    FROM segments s WHERE s.segment_id = ?1""",
    """    SELECT s.segment_id, s.start_depth, e.depth, s.parent_segment_id
    FROM sessions n JOIN entries e ON e.id = n.leaf_id
    JOIN segments s ON s.segment_id = e.segment_id WHERE n.session_id = ?1""",
).replace("?2", "?")
_LAST_COMPACTION_SQL = """
SELECT entry_id FROM om_markers WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND record_type IN ('om.folded', 'compaction') ORDER BY depth DESC LIMIT 1"""
# The newest memory record of one piece: om_markers rows less plain compactions.
_MEMORY_HEAD_SQL = f"""
SELECT entry_id FROM om_markers WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND record_type <> '{COMPACTION_MARKER}' ORDER BY depth DESC LIMIT 1"""
_PAGE_FORWARD_SQL = f"""
SELECT id, CAST(body AS BLOB) FROM entries
WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND kind = 'message' AND role IN ({", ".join("?" * len(_ELIGIBLE_ROLES))})
ORDER BY depth LIMIT ?"""

# Per-session summaries (schema.sql: session_summary). An appended batch adds its counts;
# its latest timestamp replaces the stored one only when later (fixed-width UTC text).
_ADD_TO_SUMMARY_SQL = """
INSERT INTO session_summary (session_id, entries, messages, leaves, last_activity)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (session_id) DO UPDATE SET
    entries = session_summary.entries + excluded.entries,
    messages = session_summary.messages + excluded.messages,
    leaves = session_summary.leaves + excluded.leaves,
    last_activity = CASE
        WHEN excluded.last_activity > coalesce(session_summary.last_activity, '')
        THEN excluded.last_activity ELSE session_summary.last_activity END"""
_SUMMARIES_SQL = """
SELECT s.session_id, m.entries, m.messages, m.leaves, m.last_activity, m.session_id
FROM sessions s LEFT JOIN session_summary m ON m.session_id = s.session_id
ORDER BY s.seq"""
# The same, computed from the entries: how a migration backfills the table, and how a
# read-only open of a store older than the table answers. prism_utc is utc_timestamp.
_SUMMARIES_FROM_ENTRIES_SQL = """
SELECT s.session_id AS session_id,
       (SELECT count(*) FROM entries e WHERE e.session_id = s.session_id) AS entries,
       (SELECT count(*) FROM entries e WHERE e.session_id = s.session_id
                                         AND e.kind = 'message') AS messages,
       (SELECT count(*) FROM segments g WHERE g.session_id = s.session_id) AS leaves,
       (SELECT max(prism_utc(e.timestamp)) FROM entries e
        WHERE e.session_id = s.session_id) AS last_activity,
       s.session_id AS found
FROM sessions s ORDER BY s.seq"""


async def _write_memory_folds(conn: aiosqlite.Connection, placed: Sequence[PlacedEntry]) -> None:
    """The append hook that keeps the memory fold tables in step with the entries."""
    times: dict[str, str] = {}
    wanted = undated_sources(placed)
    if wanted:
        # Observations written without observedAt (the TypeScript shape) are dated by
        # their newest source, which validation has already found on the branch.
        times = {p.entry.id: p.entry.timestamp for p in placed if p.entry.id in wanted}
        rest = sorted(wanted - times.keys())
        if rest:
            marks = ", ".join("?" * len(rest))
            sql = f"SELECT id, timestamp FROM entries WHERE id IN ({marks})"
            async with conn.execute(sql, rest) as cursor:
                times.update({row[0]: row[1] for row in await cursor.fetchall()})
    await write_fold_rows(conn, fold_rows(placed, times))


class LeafPosition(NamedTuple):
    """Where a branch ends: the leaf entry, its segment and depth, its path tokens."""

    entry_id: str
    segment_id: int
    depth: int
    path_tokens: int | None
    token_encoding: str

    def params(self, min_depth: int = 0, max_depth: int | None = None) -> dict[str, int]:
        """Bindings for ``branch_rows_sql`` over depths ``min_depth..max_depth``."""
        return {
            "leaf_segment": self.segment_id,
            "leaf_depth": self.depth,
            "min_depth": min_depth,
            "max_depth": self.depth if max_depth is None else max_depth,
        }


@dataclass(frozen=True, slots=True)
class PlacedEntry:
    """An entry as appended: its row number, segment, depth and token count."""

    entry: SessionEntry
    seq: int
    segment_id: int
    depth: int
    tokens: int


# Runs inside the append transaction, after the entry rows; raising rolls the batch back.
AppendHook = Callable[[aiosqlite.Connection, Sequence[PlacedEntry]], Awaitable[None]]


class SqliteStore(BranchDerivedReads):
    """A ``SessionStore`` in one SQLite file; open it with ``await SqliteStore.open(path)``.

    ``ledger()`` and ``scope_map()`` fold the branch (``BranchDerivedReads``) until fold
    tables answer them; ``entries_after()`` and ``recent_messages()`` are indexed reads.
    """

    def __init__(
        self,
        url: str,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        estimator: TokenEstimator,
        *,
        read_only: bool = False,
        schema_version: int = SCHEMA_VERSION,
    ) -> None:
        self.url = url
        # A read-only store has one connection; its writer is never handed out.
        self._writer = writer
        self._reader = reader
        self._estimator = estimator
        self._closed = False
        self._read_only = read_only
        self._schema_version = schema_version
        self._location = url.removeprefix("sqlite:")
        # Why writes are refused, once a write met a damaged file (here or in another
        # process, which left the note next to the file).
        self._damaged: str | None = None if read_only else _read_damage_note(self._location)
        # Held across every write transaction: the writer connection has one transaction.
        self._lock = asyncio.Lock()
        self._append_hooks: builtins.list[AppendHook] = [_write_memory_folds]

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        synchronous: str = "NORMAL",
        read_only: bool = False,
        create: bool = True,
    ) -> SqliteStore:
        """Open the store file at ``path``, check its schema, migrate an older one.

        ``create=False`` refuses (``StoreNotFoundError``) a missing or empty file instead
        of making a store of it. ``read_only=True`` never creates, changes or migrates the
        file, and its writes raise ``ReadOnlyStoreError`` (see the module docstring).
        """
        location = os.fspath(path)
        mode = _check_open_args(location, busy_timeout_ms, synchronous)
        url = f"sqlite:{location}"
        if (read_only or not create) and not await asyncio.to_thread(os.path.exists, location):
            raise StoreNotFoundError(f"no store at {location!r} ({url}): the file does not exist")
        if read_only:
            reader, version = await _open_read_only(url, location, busy_timeout_ms)
            return cls(url, reader, reader, get_estimator(), read_only=True, schema_version=version)
        schema = load_schema()
        # Without create, "rw" keeps SQLite itself from making the file after the check.
        writer = await _connect(url, location, busy_timeout_ms, uri_mode=None if create else "rw")
        try:
            await _prepare_file(url, writer, mode, schema, create=create)
            reader = await _connect(url, location, busy_timeout_ms, query_only=True)
        except BaseException:
            await _close_quietly(writer)
            raise
        return cls(url, writer, reader, get_estimator())

    # -- the SessionStore protocol ----------------------------------------------------

    async def append(self, entry: SessionEntry) -> None:
        await self.append_many([entry])

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries)
        self._open_writer()
        if not batch:
            return
        if len(batch) >= ENCODE_IN_THREAD:
            encoded = await asyncio.to_thread(_encode, batch, self._estimator)
        else:
            encoded = _encode(batch, self._estimator)

        async def work(conn: aiosqlite.Connection) -> None:
            await self._append_in(conn, batch, encoded)

        await self._writing("append", work)

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        batch = check_batch_shape(entries)
        self._open_writer()
        if not batch:
            return []
        session_id = batch[0].session_id

        async def work(conn: aiosqlite.Connection) -> builtins.list[SessionEntry]:
            # The leaf is read inside the transaction, so no other writer (thread, task
            # or process) can append between reading it and appending under it.
            rows = await _rows(conn, _LEAF_BY_SESSION_SQL, (session_id,))
            leaf = rows[0][0] if rows else None
            head = None
            # The head costs a read per fork on the branch: only a compare pays for it.
            if leaf is not None and expected_memory_head is not ANY_MEMORY_HEAD:
                _, segment_id, depth, path_tokens, encoding = rows[0]
                position = LeafPosition(leaf, segment_id, depth, path_tokens, encoding)
                head = await _memory_head_of(position, lambda sql, params: _rows(conn, sql, params))
            check_memory_head(session_id, expected_memory_head, head)
            chained = chain_at_leaf(batch, leaf)
            if len(chained) >= ENCODE_IN_THREAD:
                encoded = await asyncio.to_thread(_encode, chained, self._estimator)
            else:
                encoded = _encode(chained, self._estimator)
            await self._append_in(conn, chained, encoded)
            return chained

        return await self._writing("append", work)

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return None
        return await _memory_head_of(position, self._fetch)

    async def get(self, entry_id: str) -> SessionEntry | None:
        rows = await self._fetch(
            "SELECT id, CAST(body AS BLOB) FROM entries WHERE id = ?", (entry_id,)
        )
        return self._parse(rows[0][0], rows[0][1]) if rows else None

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist, in one query per 500 ids."""
        found: dict[str, SessionEntry] = {}
        for chunk in _chunks(sorted(set(entry_ids))):
            sql = _BODIES_BY_ID_SQL.format(marks=", ".join("?" * len(chunk)))
            for entry_id, body in await self._fetch(sql, chunk):
                found[entry_id] = self._parse(entry_id, body)
        return found

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        rows = await self._fetch(
            "SELECT id, CAST(body AS BLOB) FROM entries WHERE session_id = ? ORDER BY seq",
            (self._session(session_id),),
        )
        with collector_paused():
            return [self._parse(entry_id, body) for entry_id, body in rows]

    async def branch(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return []
        return await self._branch_range(position, 0, position.depth)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        return [row[0] for row in await self._fetch(_LEAVES_SQL, (self._session(session_id),))]

    async def leaf(self, session_id: str) -> str | None:
        rows = await self._fetch(
            "SELECT leaf_id FROM sessions WHERE session_id = ?", (self._session(session_id),)
        )
        return str(rows[0][0]) if rows else None

    async def set_leaf(self, session_id: str, entry_id: str) -> None:
        session_id = self._session(session_id)

        async def work(conn: aiosqlite.Connection) -> None:
            rows = builtins.list(
                await conn.execute_fetchall(
                    "SELECT session_id FROM entries WHERE id = ?", (entry_id,)
                )
            )
            _check_leaf_session(entry_id, session_id, rows[0][0] if rows else None)
            await conn.execute(
                "UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (entry_id, session_id)
            )

        await self._writing("set_leaf", work)

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return False
        return await self._depth_on_branch(position, entry_id) is not None

    async def sessions(self) -> builtins.list[str]:
        return [row[0] for row in await self._fetch("SELECT session_id FROM sessions ORDER BY seq")]

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        """Every session's summary, in order of creation, from the summary table.

        Costs one row per session, whatever the sessions hold; a store opened read-only
        before its migration computes them from the entries instead.
        """
        self._open_reader()
        legacy = self._schema_version < 2
        rows = await self._fetch(_SUMMARIES_FROM_ENTRIES_SQL if legacy else _SUMMARIES_SQL)
        summaries = []
        for session_id, entries, messages, leaves, last_activity, found in rows:
            if found is None:
                raise CorruptStoreError(
                    f"session {session_id!r} in {self.url} has no row in session_summary"
                )
            summaries.append(
                SessionSummary(session_id, int(entries), int(messages), int(leaves), last_activity)
            )
        return summaries

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        # Wait for a running write transaction to finish before closing its connection.
        async with self._lock:
            # A reader holds nothing to lose; the writer's close checkpoints the WAL, so
            # its errors are reported.
            await _close_quietly(self._reader)
            try:
                await self._writer.close()
            except sqlite3.Error as exc:
                raise _translate(self.url, "close", exc) from exc

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"store {self.url!r} was garbage-collected unclosed; use 'async with' "
                "or 'await store.close()'",
                ResourceWarning,
                stacklevel=1,
                source=self,
            )
            # aiosqlite's worker threads are not daemons: stop them, or a leaked store
            # would keep the interpreter from exiting.
            for conn in (self._reader, self._writer):
                conn.stop()

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
        rows = await self._fetch(_BRANCH_TOKENS_SQL, {**position.params(), "encoding": encoding})
        total = 0
        for entry_id, tokens, row_encoding, body in rows:
            if row_encoding == encoding:
                total += int(tokens)
            else:
                total += self._estimator.count_entry(self._parse(entry_id, body))
        return total

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """Branch entries strictly after ``after_id`` (all when None), root side first.

        ``EntryNotFoundError`` when ``after_id`` is not on the branch. One indexed range
        read: the cost follows the entries returned, not the branch before the cursor.
        """
        position = await self._leaf_position(session_id, leaf_id)
        if after_id is None:
            return [] if position is None else await self._branch_range(position, 0, position.depth)
        depth = None if position is None else await self._depth_on_branch(position, after_id)
        if position is None or depth is None:
            raise EntryNotFoundError(f"entry {after_id!r} is not on the branch")
        return await self._branch_range(position, depth + 1, position.depth)

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The branch's last ``count`` user/assistant/tool messages, oldest first.

        Reads the pieces from the leaf back, newest first, and stops at ``count``.
        """
        position = await self._leaf_position(session_id, leaf_id)
        if position is None or count <= 0:
            return []
        found: builtins.list[SessionEntry] = []
        for segment_id, lo, hi in reversed(await self._pieces(position)):
            params = (segment_id, lo, hi, *_ELIGIBLE_ROLES, count - len(found))
            rows = await self._fetch(_RECENT_MESSAGES_SQL, params)
            found.extend(self._parse(entry_id, body) for entry_id, body in rows)
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
        rows = [await self._fetch(sql, params) for sql in _LEDGER_SQL.values()]
        try:
            with collector_paused():
                return ledger_from_rows(*rows)
        except ValidationError as exc:
            raise CorruptStoreError(
                f"{self.url}: a memory fold row of session {session_id!r} no longer parses "
                f"({_first_line(exc)})"
            ) from exc

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger without its dropped observations: what a turn's context needs.

        Drop rows are read first (ids only, no JSON), so only observations still in the
        pool are parsed: the cost follows the active memory, which the dropper keeps
        within its cap, not everything ever recorded.
        """
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return ObservationalMemoryLedger()
        params = position.params()
        drops = await self._fetch(_LEDGER_SQL["drops"], params)
        dropped = {memory_id for _, _, memory_id in drops}
        rows = await self._fetch(_LIVE_OBSERVATIONS_SQL, params)
        observations = [r[:6] for r in rows if r[2] not in dropped]
        reflections = await self._fetch(_LEDGER_SQL["reflections"], params)
        markers = await self._fetch(_LEDGER_SQL["markers"], params)
        try:
            with collector_paused():
                return ledger_from_rows(observations, reflections, [], markers)
        except ValidationError as exc:
            raise CorruptStoreError(
                f"{self.url}: a memory fold row of session {session_id!r} no longer parses "
                f"({_first_line(exc)})"
            ) from exc

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap:
        """The branch's scope map, folded from its om.scope.* records only."""
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return fold_work_scope_map([])
        rows = await self._fetch(_SCOPE_RECORDS_SQL, position.params())
        return fold_work_scope_map(self._parse(entry_id, body) for _, entry_id, body in rows)

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger restricted to ``memory_ids``: one query by memory id, filtered to
        the branch, so exact-id recall costs the same at any transcript length."""
        wanted = sorted(set(memory_ids))
        if not wanted:
            self._session(session_id)
            return ObservationalMemoryLedger()
        marks = ", ".join("?" * len(wanted))
        if leaf_id is None:
            # The session's leaf is looked up inside the same query: one round trip.
            sql = _MEMORY_SUBSET_AT_LEAF_SQL.format(marks=marks)
            params: list[Any] = [self._session(session_id), *wanted, *wanted, *wanted]
        else:
            position = await self._leaf_position(session_id, leaf_id)
            if position is None:
                return ObservationalMemoryLedger()
            sql = _MEMORY_SUBSET_SQL.format(marks=marks)
            params = [position.segment_id, position.depth, *wanted, *wanted, *wanted]
        rows = await self._fetch(sql, params)
        observations, reflections, drops = [], [], []
        for kind, depth, ordinal, memory_id, entry_id, recorded_at, body in rows:
            if kind == 0:
                observations.append((depth, ordinal, memory_id, entry_id, recorded_at, body))
            elif kind == 1:
                reflections.append((depth, ordinal, memory_id, entry_id, recorded_at, body))
            else:
                drops.append((depth, ordinal, memory_id))
        try:
            return ledger_from_rows(sorted(observations), sorted(reflections), sorted(drops), [])
        except ValidationError as exc:
            raise CorruptStoreError(
                f"{self.url}: a memory fold row of session {session_id!r} no longer parses "
                f"({_first_line(exc)})"
            ) from exc

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The latest compaction entry on the branch, from the marker rows: O(pieces)."""
        position = await self._leaf_position(session_id, leaf_id)
        if position is None:
            return None
        for segment_id, lo, hi in reversed(await self._pieces(position)):
            rows = await self._fetch(_LAST_COMPACTION_SQL, (segment_id, lo, hi))
            if rows:
                return await self.get(rows[0][0])
        return None

    async def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """Up to ``limit`` eligible messages after/before ``cursor``: indexed, O(page)."""
        check_page_args(limit, direction)
        position = await self._leaf_position(session_id, leaf_id)
        rows = []
        if position is not None:
            cursor_params = {**position.params(), "entry_id": cursor}
            rows = await self._fetch(_CURSOR_ON_BRANCH_SQL, cursor_params)
        if position is None or not rows:
            raise EntryNotFoundError(f"cursor {cursor!r} is not an entry of the current branch")
        depth, kind, role = rows[0]
        if kind != "message" or role not in ELIGIBLE_SOURCE_ROLES:
            raise InvalidInputError(
                f"cursor {cursor!r} is a {kind} entry, not a user, assistant or tool message"
            )
        pieces = await self._pieces(position)
        found: builtins.list[SessionEntry] = []
        want = limit + 1  # one more tells whether another page follows
        forward = direction == "forward"
        for segment_id, lo, hi in pieces if forward else reversed(pieces):
            first, last = (max(lo, depth + 1), hi) if forward else (lo, min(hi, depth - 1))
            if first > last:
                continue
            sql = _PAGE_FORWARD_SQL if forward else _RECENT_MESSAGES_SQL
            params = (segment_id, first, last, *_ELIGIBLE_ROLES, want - len(found))
            found.extend(self._parse(i, b) for i, b in await self._fetch(sql, params))
            if len(found) >= want:
                break
        more = len(found) > limit
        page = found[:limit]
        if not forward:
            page.reverse()
        return page, more

    # -- helpers later features reuse -------------------------------------------------

    async def _leaf_position(self, session_id: str, leaf_id: str | None) -> LeafPosition | None:
        """The branch end: ``leaf_id`` checked against the session, or the current leaf.

        None when ``leaf_id`` is None and the session is unknown; ``EntryNotFoundError``
        or ``SessionMismatchError`` for a ``leaf_id`` that is not the session's.
        """
        session_id = self._session(session_id)
        if leaf_id is None:
            rows = await self._fetch(_LEAF_BY_SESSION_SQL, (session_id,))
            if not rows:
                return None
            current, segment_id, depth, path_tokens, encoding = rows[0]
            if segment_id is None:
                raise CorruptStoreError(
                    f"session {session_id!r} in {self.url}: its leaf {current!r} has no row"
                )
            return LeafPosition(current, segment_id, depth, path_tokens, encoding)
        rows = await self._fetch(_LEAF_BY_ID_SQL, (leaf_id,))
        _check_leaf_session(leaf_id, session_id, rows[0][0] if rows else None)
        _, segment_id, depth, path_tokens, encoding = rows[0]
        return LeafPosition(leaf_id, segment_id, depth, path_tokens, encoding)

    async def _branch_pieces(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[tuple[int, int, int]]:
        """The branch as ``(segment_id, first_depth, last_depth)`` pieces, root first."""
        position = await self._leaf_position(session_id, leaf_id)
        return [] if position is None else await self._pieces(position)

    async def _pieces(self, position: LeafPosition) -> builtins.list[tuple[int, int, int]]:
        return _sorted_pieces(await self._fetch(_BRANCH_PIECES_SQL, position.params()))

    async def _depth_on_branch(self, position: LeafPosition, entry_id: str) -> int | None:
        """The depth of ``entry_id`` if it lies on the branch ending at ``position``."""
        params = {**position.params(), "entry_id": entry_id}
        rows = await self._fetch(_DEPTH_ON_BRANCH_SQL, params)
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
        rows = await self._fetch(_BRANCH_ENTRIES_SQL, position.params(first, last))
        slots: builtins.list[SessionEntry | None] = [None] * (last - first + 1)
        with collector_paused():
            for depth, entry_id, body in rows:
                slots[depth - first] = self._parse(entry_id, body)
        if any(slot is None for slot in slots):
            missing = first + slots.index(None)
            raise CorruptStoreError(
                f"{self.url}: the branch to {position.entry_id!r} has no entry at depth {missing}"
            )
        return [slot for slot in slots if slot is not None]

    def _add_append_hook(self, hook: AppendHook) -> None:
        """Run ``hook`` inside every append transaction, after the entry rows are written."""
        self._append_hooks.append(hook)

    async def _fetch(self, sql: str, params: Params = ()) -> builtins.list[Any]:
        """All rows of one read on the reader connection, errors translated."""
        reader = self._open_reader()
        try:
            rows = await _retrying(self.url, "read", lambda: reader.execute_fetchall(sql, params))
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise
        return builtins.list(rows)

    async def _write(self, action: str, work: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        """Run ``work`` in one ``BEGIN IMMEDIATE`` transaction under the writer lock.

        A rule error (or any exception) from ``work`` rolls everything back. A busy file
        retries the whole transaction, which is safe because nothing of it was kept. A
        cancelled caller waits for the transaction to commit or roll back (see
        ``SessionStore``): aiosqlite runs a statement to its end whatever happens to the
        coroutine awaiting it, so abandoning one could leave the writer in a transaction
        that holds the file's write lock.
        """
        return await finish_then_cancel(self._write_locked(action, work))

    async def _write_locked(
        self, action: str, work: Callable[[aiosqlite.Connection], Awaitable[T]]
    ) -> T:
        async with self._lock:
            writer = self._open_writer()
            if writer.in_transaction:
                # Only a failed ROLLBACK gets here; never build on what it left behind.
                await _rollback_quietly(writer)

            async def attempt() -> T:
                try:
                    await writer.execute("BEGIN IMMEDIATE")
                    result = await work(writer)
                    await writer.execute("COMMIT")
                except BaseException:
                    if writer.in_transaction:
                        await _rollback_quietly(writer)
                    raise
                return result

            return await _retrying(self.url, action, attempt)

    def _parse(self, entry_id: str, body: object) -> SessionEntry:
        """Validate a stored body back into its entry, or raise ``CorruptStoreError``."""
        try:
            if not isinstance(body, bytes | str):
                raise TypeError(f"the body is {type(body).__name__}, not JSON text")
            entry = SessionEntry.model_validate_json(body)
        except (ValidationError, TypeError) as exc:
            raise CorruptStoreError(
                f"entry {entry_id!r} in {self.url}: its stored JSON no longer parses "
                f"({_first_line(exc)})"
            ) from exc
        if entry.id != entry_id:
            raise CorruptStoreError(
                f"entry {entry_id!r} in {self.url}: its stored JSON holds id {entry.id!r}"
            )
        return entry

    # -- the append transaction -------------------------------------------------------

    async def _append_in(
        self,
        conn: aiosqlite.Connection,
        batch: Sequence[SessionEntry],
        encoded: Sequence[tuple[str, int]],
    ) -> None:
        session_id = batch[0].session_id
        state = await _first_row(conn, _STATE_SQL, (session_id,))
        root_id, last_session_seq, last_seq, last_segment = state
        parents = await _lookup_parents(conn, _outside_parent_ids(batch))
        failure = _first_rule_failure(batch, root_id, parents)
        # Entries before a rule failure are checked as memory records, as the reference
        # index does entry by entry; a record at the failing entry itself comes second.
        limit = len(batch) if failure is None else failure[0]
        failure = await self._first_memory_failure(conn, batch, limit) or failure
        if failure is not None:
            index, error = failure
            # An earlier (or the same) entry that already exists is reported first.
            raise await _first_duplicate(conn, batch[: index + 1]) or error
        placer = _Placer(session_id, parents, last_seq, last_segment, self._estimator.name)
        with collector_paused():
            rows = [
                placer.place(entry, body, tokens)
                for entry, (body, tokens) in zip(batch, encoded, strict=True)
            ]
        if root_id is None:
            await conn.execute(
                "INSERT INTO sessions (session_id, seq, root_id, leaf_id, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (session_id, last_session_seq + 1, batch[0].id, batch[-1].id, now_timestamp()),
            )
        else:
            await conn.execute(
                "UPDATE sessions SET leaf_id = ? WHERE session_id = ?", (batch[-1].id, session_id)
            )
        if placer.segments:
            await conn.executemany(_INSERT_SEGMENT_SQL, placer.segments)
        # Each new segment ends in a new leaf (its tail); continuing one moves its leaf.
        await conn.execute(
            _ADD_TO_SUMMARY_SQL,
            (
                session_id,
                len(batch),
                sum(1 for entry in batch if entry.kind == "message"),
                len(placer.segments),
                latest_timestamp(entry.timestamp for entry in batch),
            ),
        )
        try:
            await conn.executemany(_INSERT_ENTRY_SQL, rows)
        except sqlite3.IntegrityError:
            # Ids are checked by the UNIQUE index rather than a lookup per entry.
            duplicate = await _first_duplicate(conn, batch)
            if duplicate is None:
                raise
            raise duplicate from None
        if self._append_hooks:
            with collector_paused():
                placed = [
                    PlacedEntry(entry, row[_SEQ], row[_SEGMENT], row[_DEPTH], row[_TOKENS])
                    for entry, row in zip(batch, rows, strict=True)
                ]
            for hook in self._append_hooks:
                await hook(conn, placed)

    async def _first_memory_failure(
        self, conn: aiosqlite.Connection, batch: Sequence[SessionEntry], limit: int
    ) -> tuple[int, StoreRuleError] | None:
        """The first ``om.*`` record of ``batch[:limit]`` that its branch does not support."""
        earlier: dict[str, SessionEntry] = {}
        for index, entry in enumerate(batch[:limit]):
            try:
                needs = memory_record_needs(entry)
                if needs is not None:
                    evidence = await self._path_evidence(conn, entry.parent_id, earlier, needs)
                    facts = branch_facts_from_entries(evidence, needs)
                    validate_memory_record(entry, needs, facts)
            except MemoryRecordError as exc:
                return index, exc
            earlier[entry.id] = entry
        return None

    async def _path_evidence(
        self,
        conn: aiosqlite.Connection,
        parent_id: str | None,
        earlier: Mapping[str, SessionEntry],
        needs: MemoryRecordNeeds,
    ) -> builtins.list[SessionEntry]:
        """The entries on the path from the root to ``parent_id`` that bear on ``needs``.

        Earlier entries of the batch are walked in memory; of the stored rest of the path,
        only the entries ``needs`` names and the memory records are read.
        """
        evidence: builtins.list[SessionEntry] = []
        current = parent_id
        while current is not None and current in earlier:
            evidence.append(earlier[current])
            current = earlier[current].parent_id
        if current is None:
            return evidence
        position = await _position_on(conn, current)
        pieces = _sorted_pieces(await _rows(conn, _BRANCH_PIECES_SQL, position.params()))
        for chunk in _chunks(sorted(needs.source_entry_ids | needs.covered_entry_ids)):
            sql = _ENTRIES_BY_ID_SQL.format(marks=", ".join("?" * len(chunk)))
            for entry_id, segment_id, depth, body in await _rows(conn, sql, chunk):
                if _on_pieces(pieces, segment_id, depth):
                    evidence.append(self._parse(entry_id, body))
        # The memory ids are looked up in the fold tables, by id, not by a branch scan; a
        # recording entry that lies on the path is evidence.
        recorders: set[int] = set()
        for chunk in _chunks(sorted(needs.memory_ids_to_look_up)):
            marks = ", ".join("?" * len(chunk))
            for table in ("om_observations", "om_reflections"):
                sql = _MEMORY_BY_ID_SQL.format(table=table, marks=marks)
                for seq, segment_id, depth in await _rows(conn, sql, chunk):
                    if _on_pieces(pieces, segment_id, depth):
                        recorders.add(seq)
        for chunk in _chunks([str(seq) for seq in sorted(recorders)]):
            sql = _ENTRIES_BY_SEQ_SQL.format(marks=", ".join("?" * len(chunk)))
            for entry_id, body in await _rows(conn, sql, [int(seq) for seq in chunk]):
                evidence.append(self._parse(entry_id, body))
        return evidence

    # -- connection state -------------------------------------------------------------

    def _session(self, session_id: str) -> str:
        """Check the store is open, then that ``session_id`` is a valid name."""
        self._open_reader()
        return validate_session_id(session_id)

    def _open_reader(self) -> aiosqlite.Connection:
        if self._closed:
            raise StoreClosedError(f"store {self.url!r} is closed")
        return self._reader

    def _open_writer(self) -> aiosqlite.Connection:
        if self._closed:
            raise StoreClosedError(f"store {self.url!r} is closed")
        if self._read_only:
            raise ReadOnlyStoreError(
                f"store {self.url!r} was opened read-only: open it without read_only to write"
            )
        if self._damaged is not None:
            raise CorruptStoreError(
                f"{self.url} is damaged ({self._damaged}); writes are refused so that "
                f"nothing more lands in a broken file: run 'prism-om check --db "
                f"{self._location}', then remove {self._location + DAMAGED_SUFFIX!r}"
            )
        return self._writer

    async def _writing(
        self, action: str, work: Callable[[aiosqlite.Connection], Awaitable[T]]
    ) -> T:
        """``_write``, marking the store damaged when the write meets a damaged file."""
        try:
            return await self._write(action, work)
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise

    def _mark_damaged(self, exc: CorruptStoreError) -> None:
        """Refuse later writes, here and (through the note) in other processes."""
        if self._read_only or self._damaged is not None:
            return
        self._damaged = _first_line(exc)
        note = self._location + DAMAGED_SUFFIX
        # The note is best effort: where it cannot be written, this process still refuses.
        with contextlib.suppress(OSError):
            fd = os.open(note, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, f"{now_timestamp()} {self._damaged}\n".encode())
            finally:
                os.close(fd)


# -- placing a batch in the tree ---------------------------------------------------------


class _StoredParent(NamedTuple):
    """A parent outside the batch, as stored: what placing its children needs."""

    session_id: str
    depth: int
    segment_id: int
    has_child: bool
    path_tokens: int | None
    token_encoding: str


class _Placer:
    """Gives each entry of a checked batch its row: seq, depth, segment, path tokens.

    Parents inside the batch are found in batch-local dicts of plain values (no object
    per entry, which keeps a 100,000-entry batch cheap); the ones outside it were looked
    up once, before placing.
    """

    def __init__(
        self,
        session_id: str,
        parents: Mapping[str, _StoredParent],
        last_seq: int,
        last_segment: int,
        encoding: str,
    ) -> None:
        self.session_id = session_id
        self.seq = last_seq
        self.segment = last_segment
        self.encoding = encoding
        self.segments: builtins.list[tuple[int, str, int | None, int]] = []
        self.depth = {pid: p.depth for pid, p in parents.items()}
        self.segment_of = {pid: p.segment_id for pid, p in parents.items()}
        self.has_child = {pid for pid, p in parents.items() if p.has_child}
        # A path sum is only kept while the whole path was counted with one encoding.
        self.path_tokens = {
            pid: p.path_tokens if p.token_encoding == encoding else None
            for pid, p in parents.items()
        }

    def _new_segment(self, parent_segment: int | None, start_depth: int) -> int:
        self.segment += 1
        self.segments.append((self.segment, self.session_id, parent_segment, start_depth))
        return self.segment

    def place(self, entry: SessionEntry, body: str, tokens: int) -> tuple[Any, ...]:
        own = tokens if entry.kind == "message" else 0
        parent_id = entry.parent_id
        path_tokens: int | None
        if parent_id is None:
            depth, segment, path_tokens = 0, self._new_segment(None, 0), own
        else:
            depth = self.depth[parent_id] + 1
            if parent_id in self.has_child:
                segment = self._new_segment(self.segment_of[parent_id], depth)
            else:
                segment = self.segment_of[parent_id]
                self.has_child.add(parent_id)
            parent_path = self.path_tokens[parent_id]
            path_tokens = None if parent_path is None else parent_path + own
        self.seq += 1
        self.depth[entry.id] = depth
        self.segment_of[entry.id] = segment
        self.path_tokens[entry.id] = path_tokens
        return (
            self.seq,
            entry.id,
            self.session_id,
            parent_id,
            entry.kind,
            entry.role,
            entry.custom_type,
            entry.timestamp,
            depth,
            segment,
            tokens,
            self.encoding,
            path_tokens,
            body,
        )


def _encode(batch: Sequence[SessionEntry], estimator: TokenEstimator) -> list[tuple[str, int]]:
    """Each entry's wire JSON and token count, computed once at append."""
    with collector_paused():
        return [(e.model_dump_json(by_alias=True), estimator.count_entry(e)) for e in batch]


def _outside_parent_ids(batch: Sequence[SessionEntry]) -> builtins.list[str]:
    """Parent ids that are not an earlier entry of the batch, in first-use order."""
    earlier: set[str] = set()
    outside: dict[str, None] = {}
    for entry in batch:
        if entry.parent_id is not None and entry.parent_id not in earlier:
            outside[entry.parent_id] = None
        earlier.add(entry.id)
    return builtins.list(outside)


async def _lookup_parents(
    conn: aiosqlite.Connection, ids: Sequence[str]
) -> dict[str, _StoredParent]:
    """Session and tree position of each stored entry among ``ids``."""
    found: dict[str, _StoredParent] = {}
    for chunk in _chunks(ids):
        sql = _PARENTS_SQL.format(marks=", ".join("?" * len(chunk)))
        for row in await conn.execute_fetchall(sql, chunk):
            entry_id, session_id, segment, depth, path, encoding, has_child = row
            found[entry_id] = _StoredParent(
                session_id, depth, segment, bool(has_child), path, encoding
            )
    return found


def _first_rule_failure(
    batch: Sequence[SessionEntry],
    root_id: str | None,
    parents: Mapping[str, _StoredParent],
) -> tuple[int, StoreRuleError] | None:
    """The first entry that breaks a root or parent rule, in the reference order.

    Duplicate ids are left to the caller; everything else matches ``TreeIndex.check``.
    """
    session_id = batch[0].session_id
    earlier: set[str] = set()
    for index, entry in enumerate(batch):
        if entry.parent_id is None:
            if root_id is not None:
                return index, RootExistsError(
                    f"entry {entry.id!r} has no parent, but session {session_id!r} "
                    f"already has its root {root_id!r}"
                )
            root_id = entry.id
        elif entry.parent_id not in earlier:
            found = parents.get(entry.parent_id)
            if found is None:
                return index, UnknownParentError(
                    f"entry {entry.id!r} names parent {entry.parent_id!r}, "
                    "which is not in the store"
                )
            if found.session_id != session_id:
                return index, SessionMismatchError(
                    f"entry {entry.id!r} of session {session_id!r} names parent "
                    f"{entry.parent_id!r} of session {found.session_id!r}"
                )
        earlier.add(entry.id)
    return None


async def _first_duplicate(
    conn: aiosqlite.Connection, entries: Sequence[SessionEntry]
) -> DuplicateEntryError | None:
    """The error for the first of ``entries`` whose id is already stored, if any."""
    stored: set[str] = set()
    for chunk in _chunks([e.id for e in entries]):
        marks = ", ".join("?" * len(chunk))
        rows = await conn.execute_fetchall(f"SELECT id FROM entries WHERE id IN ({marks})", chunk)
        stored.update(row[0] for row in rows)
    for entry in entries:
        if entry.id in stored:
            return DuplicateEntryError(f"entry id {entry.id!r} already exists in the store")
    return None


def _check_leaf_session(entry_id: str, session_id: str, owner: str | None) -> None:
    if owner is None:
        raise EntryNotFoundError(f"entry {entry_id!r} is not in the store")
    if owner != session_id:
        raise SessionMismatchError(
            f"entry {entry_id!r} belongs to session {owner!r}, not {session_id!r}"
        )


def _chunks(items: Sequence[str]) -> Iterable[builtins.list[str]]:
    for start in range(0, len(items), LOOKUP_CHUNK):
        yield builtins.list(items[start : start + LOOKUP_CHUNK])


def _sorted_pieces(rows: Iterable[Any]) -> builtins.list[tuple[int, int, int]]:
    """Rows of ``_BRANCH_PIECES_SQL`` as ``(segment_id, lo, hi)``, root first."""
    return sorted(((int(s), int(lo), int(hi)) for s, lo, hi in rows), key=lambda p: p[1])


def _on_pieces(pieces: Iterable[tuple[int, int, int]], segment_id: int, depth: int) -> bool:
    return any(s == segment_id and lo <= depth <= hi for s, lo, hi in pieces)


async def _rows(conn: aiosqlite.Connection, sql: str, params: Params = ()) -> builtins.list[Any]:
    return builtins.list(await conn.execute_fetchall(sql, params))


async def _memory_head_of(
    position: LeafPosition, fetch: Callable[[str, Params], Awaitable[builtins.list[Any]]]
) -> str | None:
    """The newest memory record on the branch ending at ``position``: O(pieces) reads."""
    pieces = _sorted_pieces(await fetch(_BRANCH_PIECES_SQL, position.params()))
    for segment_id, lo, hi in reversed(pieces):
        rows = await fetch(_MEMORY_HEAD_SQL, (segment_id, lo, hi))
        if rows:
            return str(rows[0][0])
    return None


async def _position_on(conn: aiosqlite.Connection, entry_id: str) -> LeafPosition:
    """The position of a stored entry, read inside the write transaction."""
    segment_id, depth, path_tokens, encoding = await _first_row(conn, _POSITION_SQL, (entry_id,))
    return LeafPosition(entry_id, segment_id, depth, path_tokens, encoding)


# -- opening a file ---------------------------------------------------------------------

# The note a write that met a damaged file leaves next to it: "<file>-damaged".
DAMAGED_SUFFIX = "-damaged"
# A read-only open retries immutable=1 after these (no -shm file could be made).
_READ_ONLY_CODES = frozenset({sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN})


def _read_damage_note(location: str) -> str | None:
    """The reason in the file's damage note, or None when there is none."""
    try:
        with open(location + DAMAGED_SUFFIX, "rb") as note:
            text = note.read(4096).decode("utf-8", "replace").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        text = f"a damage note that cannot be read: {exc.strerror}"
    return f"marked damaged by an earlier write: {text or 'no reason recorded'}"


async def _open_read_only(url: str, location: str, busy_timeout_ms: int) -> tuple[Any, int]:
    """The one connection of a read-only store, and the file's schema version."""
    conn = await _connect(url, location, busy_timeout_ms, uri_mode="ro")
    try:
        try:
            version, app_id = await _file_marks(conn)
        except sqlite3.Error as exc:
            if _primary_code(exc) not in _READ_ONLY_CODES:
                raise _translate(url, "open", exc) from exc
            await _close_quietly(conn)
            conn = await _immutable_connection(url, location, busy_timeout_ms, exc)
            version, app_id = await _retrying(url, "open", lambda: _file_marks(conn))
        if version == 0:
            (tables,) = await _retrying(
                url, "open", lambda: _first_row(conn, "SELECT count(*) FROM sqlite_master")
            )
            if not tables:
                raise StoreNotFoundError(
                    f"no store at {location!r} ({url}): the file is empty, and a read "
                    "does not make a store of it"
                )
            raise StoreError(
                f"{url} is not a prism_om store: it holds tables but no schema version"
            )
        _check_marks(url, version, app_id)
    except BaseException:
        await _close_quietly(conn)
        raise
    return conn, version


async def _immutable_connection(
    url: str, location: str, busy_timeout_ms: int, cause: sqlite3.Error
) -> aiosqlite.Connection:
    """A read-only connection that needs no ``-shm`` file: it ignores the WAL, so it is
    only taken when the WAL holds no committed writes."""
    wal = location + "-wal"
    with contextlib.suppress(OSError):
        if await asyncio.to_thread(os.path.getsize, wal) > 0:
            raise StoreError(
                f"{url}: committed writes still wait in {wal!r}, and a read-only "
                f"open cannot read them ({cause}): open the store once with write access "
                "in that directory, or copy the files somewhere writable"
            ) from cause
    return await _connect(url, location, busy_timeout_ms, uri_mode="ro&immutable=1")


def _check_open_args(location: str, busy_timeout_ms: int, synchronous: str) -> str:
    """Validate ``open``'s arguments; return the ``synchronous`` mode to set."""
    if not location or location == ":memory:" or location.startswith("file:"):
        raise InvalidInputError(
            f"sqlite store path {location!r}: name a file (use the memory: store for "
            "a store that lives in the process)"
        )
    if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
        raise InvalidInputError(f"busy_timeout_ms must be an int, got {busy_timeout_ms!r}")
    if busy_timeout_ms < 0:
        raise InvalidInputError(f"busy_timeout_ms must be >= 0, got {busy_timeout_ms}")
    mode = synchronous.upper() if isinstance(synchronous, str) else ""
    if mode not in SYNCHRONOUS_MODES:
        raise InvalidInputError(
            f"synchronous={synchronous!r}: use 'NORMAL' (survives an application crash) "
            "or 'FULL' (also survives power loss)"
        )
    return mode


async def _connect(
    url: str,
    location: str,
    busy_timeout_ms: int,
    *,
    query_only: bool = False,
    uri_mode: str | None = None,
) -> aiosqlite.Connection:
    """One connection in autocommit mode: transactions are begun explicitly.

    ``uri_mode`` opens the file as a URI with ``mode=<uri_mode>`` (``ro``, ``rw``, ...),
    which SQLite honours by never creating the file.
    """
    target = location if uri_mode is None else _file_uri(location, uri_mode)
    try:
        # aiosqlite leaves its worker thread to finish stopping after a failed connect,
        # which can outlive the event loop; a plain probe reports an unopenable path first.
        await asyncio.to_thread(_probe, target, uri_mode is not None)
        pending = aiosqlite.connect(target, isolation_level=None, uri=uri_mode is not None)
        # A store the caller forgot to close must not keep the interpreter from exiting:
        # aiosqlite's worker thread is not a daemon. Killing it at exit is as safe as a
        # crash, which WAL survives.
        thread = getattr(pending, "_thread", None)
        if isinstance(thread, threading.Thread):
            thread.daemon = True
        conn = await pending
    except sqlite3.Error as exc:
        raise _translate(url, "open", exc) from exc
    try:
        # busy_timeout first, so that everything after it waits for a busy file.
        await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if query_only:
            await conn.execute("PRAGMA query_only = ON")
        # Migrations and read-only opens of an old file compare timestamps as times.
        await conn.create_function("prism_utc", 1, utc_timestamp, deterministic=True)
    except BaseException as exc:
        await _close_quietly(conn)
        if isinstance(exc, sqlite3.Error):
            raise _translate(url, "open", exc) from exc
        raise
    return conn


def _probe(target: str, uri: bool) -> None:
    sqlite3.connect(target, uri=uri).close()


def _file_uri(location: str, mode: str) -> str:
    # as_uri percent-encodes, so a path holding '?' or '#' stays a path.
    return f"{Path(location).absolute().as_uri()}?mode={mode}"


async def _prepare_file(
    url: str, conn: aiosqlite.Connection, mode: str, schema: Schema, *, create: bool = True
) -> None:
    """Switch to WAL, set ``synchronous``, and apply, migrate or check the schema."""
    if not create:
        # An empty file reads as a database of version 0; without create it stays empty.
        version, _ = await _retrying(url, "open", lambda: _file_marks(conn))
        (tables,) = await _retrying(
            url, "open", lambda: _first_row(conn, "SELECT count(*) FROM sqlite_master")
        )
        if version == 0 and not tables:
            location = url.removeprefix("sqlite:")
            raise StoreNotFoundError(
                f"no store at {location!r} ({url}): the file is empty, and this open may "
                "not create a store"
            )

    async def set_wal() -> None:
        rows = builtins.list(await conn.execute_fetchall("PRAGMA journal_mode = WAL"))
        if not rows or str(rows[0][0]).lower() != "wal":
            raise StoreError(f"{url}: could not switch the file to WAL mode")

    await _retrying(url, "open", set_wal)
    await _retrying(url, "open", lambda: conn.execute(f"PRAGMA synchronous = {mode}"))
    version, app_id = await _retrying(url, "open", lambda: _file_marks(conn))
    if version == 0:
        await _retrying(url, "open", lambda: _apply_schema(url, conn, schema))
    else:
        _check_marks(url, version, app_id)
        if version < SCHEMA_VERSION:
            await _retrying(url, "migrate", lambda: _migrate(url, conn, schema))


async def _file_marks(conn: aiosqlite.Connection) -> tuple[int, int]:
    """The file's ``(user_version, application_id)``."""
    version = (await _first_row(conn, "PRAGMA user_version"))[0]
    app_id = (await _first_row(conn, "PRAGMA application_id"))[0]
    return int(version), int(app_id)


async def _first_row(conn: aiosqlite.Connection, sql: str, params: Params = ()) -> Any:
    """The first row of a query that always returns one."""
    return next(iter(await conn.execute_fetchall(sql, params)))


def _check_marks(url: str, version: int, app_id: int) -> None:
    if version < 0:
        raise CorruptStoreError(f"{url}: the file header holds schema version {version}")
    if app_id != APPLICATION_ID:
        raise StoreError(
            f"{url} is not a prism_om store (application_id {app_id:#x}, "
            f"expected {APPLICATION_ID:#x})"
        )
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"{url} has schema version {version}, newer than version {SCHEMA_VERSION} that "
            "this prism_om supports: upgrade prism-om to open it"
        )
    if version < SCHEMA_VERSION and any(
        v not in MIGRATIONS for v in range(version, SCHEMA_VERSION)
    ):
        raise StoreError(
            f"{url} has schema version {version}, and no migration to version "
            f"{SCHEMA_VERSION} exists"
        )


async def _apply_schema(url: str, conn: aiosqlite.Connection, schema: Schema) -> None:
    """Create the tables of a fresh file in one transaction, then stamp its version."""
    await conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have created the schema while this one waited for the lock.
        version, app_id = await _file_marks(conn)
        if version != 0:
            _check_marks(url, version, app_id)
        else:
            (tables,) = await _first_row(conn, "SELECT count(*) FROM sqlite_master")
            if tables:
                raise StoreError(
                    f"{url} is not a prism_om store: it holds tables but no schema version"
                )
            for statement in schema.statements:
                await conn.execute(statement)
            await conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await conn.execute("COMMIT")
    except BaseException:
        await _rollback_quietly(conn)
        raise


async def _backfill_session_summary(conn: aiosqlite.Connection) -> None:
    """Version 1 to 2: the session_summary table, filled from the entries."""
    columns = "session_id, entries, messages, leaves, last_activity"
    await conn.execute(
        f"INSERT INTO session_summary ({columns}) "
        f"SELECT {columns} FROM ({_SUMMARIES_FROM_ENTRIES_SQL})"
    )


# Migration steps, keyed by the version they start from. Each runs inside the one
# transaction of _migrate, after every CREATE ... IF NOT EXISTS of schema.sql has made the
# new tables and indexes; it fills them from the entries.
MIGRATIONS: dict[int, Callable[[aiosqlite.Connection], Awaitable[None]]] = {
    1: _backfill_session_summary,
}


async def _migrate(url: str, conn: aiosqlite.Connection, schema: Schema) -> None:
    """Bring an older file to ``SCHEMA_VERSION`` in one transaction: all steps or none."""
    await conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated the file while this one waited for the lock.
        version, app_id = await _file_marks(conn)
        _check_marks(url, version, app_id)
        if version < SCHEMA_VERSION:
            for statement in schema.statements:
                await conn.execute(statement)
            for step in range(version, SCHEMA_VERSION):
                await MIGRATIONS[step](conn)
            await conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        await conn.execute("COMMIT")
    except BaseException:
        await _rollback_quietly(conn)
        raise


# -- sqlite3 errors at the boundary -----------------------------------------------------

_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})
_CORRUPT_WORDS = ("malformed", "not a database", "could not decode", "corrupt")


def _primary_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code & 0xFF if isinstance(code, int) else None


def _is_busy(exc: sqlite3.Error) -> bool:
    return _primary_code(exc) in _BUSY_CODES or "database is locked" in str(exc)


def _translate(url: str, action: str, exc: sqlite3.Error) -> StoreError:
    """The prism_om error for a ``sqlite3`` error (the caller chains it with ``from``)."""
    text = str(exc)
    if _is_busy(exc):
        return StoreBusyError(f"{action} on {url}: the file stayed locked by another writer")
    if _primary_code(exc) in _CORRUPT_CODES or any(w in text.lower() for w in _CORRUPT_WORDS):
        return CorruptStoreError(f"{action} on {url}: the file is unreadable ({text})")
    if _primary_code(exc) == sqlite3.SQLITE_FULL or _extended_code(exc) in _WRITE_FAILED_CODES:
        return StoreError(f"{action} on {url} failed: {_write_failure(url, text)}")
    return StoreError(f"{action} on {url} failed: {text}")


# SQLite reports a short write (EFBIG past ``ulimit -f``, ENOSPC) as "disk I/O error" or
# "database or disk is full", without errno: say which limits could be the cause.
_WRITE_FAILED_CODES = frozenset(
    {
        sqlite3.SQLITE_IOERR_WRITE,
        sqlite3.SQLITE_IOERR_FSYNC,
        sqlite3.SQLITE_IOERR_TRUNCATE,
        sqlite3.SQLITE_IOERR_SHMSIZE,
    }
)


def _extended_code(exc: sqlite3.Error) -> int | None:
    code = getattr(exc, "sqlite_errorcode", None)
    return code if isinstance(code, int) else None


def _write_failure(url: str, text: str) -> str:
    location = url.removeprefix("sqlite:")
    files = f"{location!r} (or its -wal/-journal file)"
    causes = []
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY:
        causes.append(f"the file size limit of this process (ulimit -f: {soft} bytes) was reached")
    with contextlib.suppress(OSError):
        stat = os.statvfs(os.path.dirname(os.path.abspath(location)))
        free = stat.f_bavail * stat.f_frsize
        # A few pages' worth left counts as full: SQLite grows files a page at a time.
        if free < 1 << 20:
            causes.append(f"the disk holding it is full ({free} bytes free)")
    if not causes:
        return f"could not write {files}: {text}"
    return f"could not write {files}: {' or '.join(causes)} ({text})"


async def _retrying(url: str, action: str, operation: Callable[[], Awaitable[T]]) -> T:
    """Run ``operation``, retrying a busy file a few times, translating sqlite3 errors."""
    for attempt in range(1, BUSY_ATTEMPTS + 1):
        try:
            return await operation()
        except sqlite3.Error as exc:
            if not _is_busy(exc) or attempt == BUSY_ATTEMPTS:
                raise _translate(url, action, exc) from exc
        # Jitter keeps two waiting processes from retrying in lockstep.
        await asyncio.sleep(BUSY_BACKOFF_S * attempt * (0.5 + random.random()))
    raise AssertionError("unreachable")  # pragma: no cover


async def _rollback_quietly(conn: aiosqlite.Connection) -> None:
    # The error that got us here is the one to report; a failed ROLLBACK (no transaction
    # left, or a broken file) adds nothing to it.
    with contextlib.suppress(sqlite3.Error):
        await conn.execute("ROLLBACK")


async def _close_quietly(conn: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.Error):
        await conn.close()


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, ValidationError):
        first = exc.errors()[0]
        return f"{first['type']}: {first['msg']}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
