"""SQL text of the SQLite adapter, and the bindings of a branch read."""

from __future__ import annotations

import builtins
import functools
import itertools
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from ...core.records import FOLDED_TYPE
from ...core.sources import ELIGIBLE_SOURCE_ROLES
from .._rows import entry_columns
from .connection import Params, SqlReader

# The om_markers record type of a compaction that carries no om.folded memory.
COMPACTION_MARKER = "compaction"
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


def ledger_queries() -> dict[str, str]:
    """The four branch reads a ledger needs, in branch order."""
    return {
        "observations": branch_rows_sql(
            "o.depth, o.ordinal, o.memory_id, o.entry_id, o.recorded_at, o.body",
            "om_observations",
            "o",
        )
        + " ORDER BY o.depth, o.ordinal",
        "reflections": branch_rows_sql(
            "r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body",
            "om_reflections",
            "r",
        )
        + " ORDER BY r.depth, r.ordinal",
        "drops": branch_rows_sql("d.depth, d.ordinal, d.memory_id", "om_drops", "d")
        + " ORDER BY d.depth, d.ordinal",
        "markers": branch_rows_sql(
            "m.depth, m.entry_id, m.record_type, m.covers_up_to_id", "om_markers", "m"
        )
        + " ORDER BY m.depth",
    }


def scope_records_query() -> str:
    """The branch's om.scope.* entries (depth, then an entry row), in branch order."""
    # One primary-key lookup per column and record: scope records are few, and the
    # subqueries keep PostgreSQL's plan an index lookup per row.
    columns = ", ".join(
        f"(SELECT {column} FROM entries e WHERE e.seq = s.entry_seq)"
        for column in entry_columns("e").split(", ")
    )
    return branch_rows_sql(f"s.depth, {columns}", "om_scope_records", "s") + " ORDER BY s.depth"


# Rows of whole entries select ENTRY_COLUMNS (stores/_rows.py: the envelope, then body).
ENTRY_COLUMNS = entry_columns()
# The depth last, so a row is handed to the parser as it is (it reads the first seven).
BRANCH_ENTRIES_SQL = branch_rows_sql(f"{entry_columns('e')}, e.depth", "entries", "e")
BRANCH_DEPTH_COLUMN = 7
BRANCH_PIECES_SQL = f"{BRANCH_PATH_CTE}\nSELECT segment_id, lo, hi FROM branch_path"
# The data and body columns of one record type's entries on the branch (schema 4: a
# custom entry's data object is its body; schema 7: a message entry's is its data column,
# its body the message); the depth first, as pieces come leaf side first and are put in
# order in Python.
MARKED_DATA_SQL = branch_rows_sql(
    "e.depth, CAST(e.data AS BLOB), CAST(e.body AS BLOB)",
    "entries",
    "e",
    "e.custom_type = :custom_type",
)
# Segments belong to one session, so a row on the pieces is of the leaf's session.
DEPTH_ON_BRANCH_SQL = f"""{BRANCH_PATH_CTE}
SELECT e.depth FROM entries e CROSS JOIN branch_path bp
WHERE e.id = :entry_id AND bp.segment_id = e.segment_id AND e.depth BETWEEN bp.lo AND bp.hi"""
# The same test, also answering what the cursor of a page is.
CURSOR_ON_BRANCH_SQL = DEPTH_ON_BRANCH_SQL.replace(
    "SELECT e.depth ", "SELECT e.depth, e.kind, e.role "
)
ELIGIBLE_ROLES = tuple(sorted(ELIGIBLE_SOURCE_ROLES))
# The role test of a piece's rows, one ``?`` per eligible role. Written as equalities ORed:
# SQLite builds a temporary b-tree of an ``IN (?, ?, ?)`` list on every run of the
# statement (~2.5 µs of a page of 20 or a turn's recent messages), and none for these.
ROLE_IS_ELIGIBLE = "(" + " OR ".join("role = ?" for _ in ELIGIBLE_ROLES) + ")"
# Newest first within one piece, straight off the (segment_id, depth) index.
RECENT_MESSAGES_SQL = f"""
SELECT {ENTRY_COLUMNS} FROM entries
WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND kind = 'message' AND {ROLE_IS_ELIGIBLE}
ORDER BY depth DESC LIMIT ?"""
# Where a memory id was recorded, any branch: the caller keeps the rows on its path.
MEMORY_BY_ID_SQL = "SELECT entry_seq, segment_id, depth FROM {table} WHERE memory_id IN ({marks})"
BODIES_BY_ID_SQL = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id IN ({{marks}})"
ENTRIES_BY_SEQ_SQL = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE seq IN ({{marks}})"
ENTRIES_BY_ID_SQL = f"""
SELECT segment_id, depth, {ENTRY_COLUMNS} FROM entries WHERE id IN ({{marks}})"""
POSITION_SQL = """
SELECT segment_id, depth, path_tokens, token_encoding FROM entries WHERE id = ?"""
BRANCH_TOKENS_SQL = branch_rows_sql(
    "e.tokens, e.token_encoding, e.id, e.session_id, e.parent_id, e.kind, e.timestamp,"
    " CASE WHEN e.token_encoding = :encoding THEN NULL ELSE CAST(e.body AS BLOB) END",
    "entries",
    "e",
    where="e.kind = 'message'",
)
LEAF_BY_SESSION_SQL = """
SELECT s.leaf_id, e.segment_id, e.depth, e.path_tokens, e.token_encoding
FROM sessions s LEFT JOIN entries e ON e.id = s.leaf_id
WHERE s.session_id = ?"""
LEAF_BY_ID_SQL = """
SELECT session_id, segment_id, depth, path_tokens, token_encoding FROM entries WHERE id = ?"""
# A segment's tail is exactly an entry without children, so the leaves are the tails.
LEAVES_SQL = """
SELECT e.id FROM segments s
JOIN entries e ON e.segment_id = s.segment_id
 AND e.depth = (SELECT max(t.depth) FROM entries t WHERE t.segment_id = s.segment_id)
WHERE s.session_id = ?
ORDER BY e.seq"""
STATE_SQL = """
SELECT (SELECT root_id FROM sessions WHERE session_id = ?),
       (SELECT coalesce(max(seq), 0) FROM sessions),
       (SELECT coalesce(max(seq), 0) FROM entries),
       (SELECT coalesce(max(segment_id), 0) FROM segments)"""
# "Has a child" is "has an entry one deeper in its segment": the first child continues it.
PARENTS_SQL = """
SELECT p.id, p.session_id, p.segment_id, p.depth, p.path_tokens, p.token_encoding,
       EXISTS (SELECT 1 FROM entries c WHERE c.segment_id = p.segment_id
                                         AND c.depth = p.depth + 1)
FROM entries p WHERE p.id IN ({marks})"""
# STATE_SQL's row (tagged 0, padded) and PARENTS_SQL's rows (tagged 1) in one statement:
# the append reads both before placing a batch, and each statement costs a step.
STATE_AND_PARENTS_SQL = (
    f"SELECT 0, *, NULL, NULL, NULL FROM ({STATE_SQL})\nUNION ALL\nSELECT 1, * FROM ({PARENTS_SQL})"
)
# The migration to schema version 7 (schema.sql: entries.data); the same text for both
# engines.
MESSAGE_DATA_COLUMN_SQL = "ALTER TABLE entries ADD COLUMN data TEXT"
INSERT_ENTRY_SQL = """
INSERT INTO entries (seq, id, session_id, parent_id, kind, role, custom_type, timestamp,
                     depth, segment_id, tokens, token_encoding, path_tokens, body, data)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"""
# Positions in an entry row as Placer.place builds it, in the column order above.
ROW_SEQ, ROW_DEPTH, ROW_SEGMENT, ROW_TOKENS = 0, 8, 9, 10
# At most this many rows per INSERT: 64 x 15 values stays under 999, SQLite's smallest
# default limit of bound values (before 3.32).
ENTRY_ROWS_PER_INSERT = 64
_ONE_ENTRY_ROW = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


@functools.cache
def insert_entries_sql(count: int) -> str:
    """``INSERT_ENTRY_SQL`` for ``count`` rows in one statement."""
    return INSERT_ENTRY_SQL.replace(_ONE_ENTRY_ROW, ", ".join([_ONE_ENTRY_ROW] * count))


def insert_entry_statements(
    rows: Sequence[Sequence[Any]],
) -> Iterator[tuple[str, builtins.list[Any]]]:
    """The statements that insert ``rows``: a few multi-row INSERTs instead of one step
    per row (``executemany`` binds and steps each row on its own, which cost a batch of
    100 about a third more). Each takes the largest power of two of rows that is left (up
    to ``ENTRY_ROWS_PER_INSERT``), so 100 rows are 64 + 32 + 4 and only seven statement
    texts exist, each prepared once and kept in the connection's statement cache."""
    start = 0
    while start < len(rows):
        count = min(ENTRY_ROWS_PER_INSERT, 1 << ((len(rows) - start).bit_length() - 1))
        chunk = rows[start : start + count]
        start += count
        yield insert_entries_sql(count), builtins.list(itertools.chain.from_iterable(chunk))


# A chain of messages (placement.ChainRows): each row binds only what differs per entry,
# in CHAIN_ROW_VALUES parameters; the batch's constants are bound once (?1 session id, ?2
# token encoding) and the chain's arithmetic is SQL (seq and depth count up from the
# first row's ?3 and ?4 in segment ?5; each parent is the id bound for the row before,
# the first one's ?6). Binding six values a row instead of fourteen is most of its cost.
CHAIN_ROW_VALUES = 6
_CHAIN_HEAD_VALUES = 6


@functools.cache
def insert_chain_sql(count: int) -> str:
    """The INSERT of ``count`` rows of a chain, numbered parameters as described above."""
    rows = []
    for n in range(count):
        first = _CHAIN_HEAD_VALUES + 1 + n * CHAIN_ROW_VALUES
        entry_id, role, timestamp, tokens, path, body = (
            f"?{first + k}" for k in range(CHAIN_ROW_VALUES)
        )
        parent = "?6" if n == 0 else f"?{first - CHAIN_ROW_VALUES}"
        rows.append(
            f"(?3 + {n}, {entry_id}, ?1, {parent}, 'message', {role}, NULL, {timestamp}, "
            f"?4 + {n}, ?5, {tokens}, ?2, {path}, {body}, NULL)"
        )
    return INSERT_ENTRY_SQL.replace(_ONE_ENTRY_ROW, ", ".join(rows))


def insert_chain_statements(
    head: Sequence[Any], values: Sequence[Any]
) -> Iterator[tuple[str, builtins.list[Any]]]:
    """The statements that insert a placed chain (``head``, ``values``: see
    ``placement.ChainRows``), cut as ``insert_entry_statements`` cuts rows; at most
    6 + 64 x 6 values a statement, under SQLite's smallest limit of 999."""
    session_id, encoding, seq, depth, segment, parent_id = head
    total = len(values) // CHAIN_ROW_VALUES
    start = 0
    while start < total:
        count = min(ENTRY_ROWS_PER_INSERT, 1 << ((total - start).bit_length() - 1))
        if start:
            parent_id = values[(start - 1) * CHAIN_ROW_VALUES]
        params = [session_id, encoding, seq + start, depth + start, segment, parent_id]
        params += values[start * CHAIN_ROW_VALUES : (start + count) * CHAIN_ROW_VALUES]
        yield insert_chain_sql(count), params
        start += count


INSERT_SEGMENT_SQL = """
INSERT INTO segments (segment_id, session_id, parent_segment_id, start_depth)
VALUES (?, ?, ?, ?)"""


LEDGER_SQL = ledger_queries()
# Its own query, not a fifth of LEDGER_SQL: a store older than the table (opened
# read-only, so not migrated) reads without it.
SUPERSESSIONS_SQL = (
    branch_rows_sql("s.depth, s.ordinal, s.memory_id, s.superseded_by", "om_supersessions", "s")
    + " ORDER BY s.depth, s.ordinal"
)
SCOPE_RECORDS_SQL = scope_records_query()


# Rows recorded on the branch whose memory id is not named by a row of ``table`` on the
# same branch (a drop or a supersession): the memory_id index answers each test inside
# SQLite, so the rows returned and parsed follow the active memory, not all ever recorded.
def _not_named_on_branch(table: str, alias: str, row: str) -> str:
    return (
        f"NOT EXISTS (SELECT 1 FROM {table} {alias} CROSS JOIN branch_path lb"
        f" WHERE {alias}.memory_id = {row}.memory_id AND {alias}.segment_id = lb.segment_id"
        f" AND {alias}.depth BETWEEN lb.lo AND lb.hi)"
    )


LIVE_OBSERVATIONS_SQL = (
    branch_rows_sql(
        "o.depth, o.ordinal, o.memory_id, o.entry_id, o.recorded_at, o.body",
        "om_observations",
        "o",
        where=_not_named_on_branch("om_drops", "d", "o"),
    )
    + " ORDER BY o.depth, o.ordinal"
)
LIVE_REFLECTIONS_SQL = (
    branch_rows_sql(
        "r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body",
        "om_reflections",
        "r",
        where=_not_named_on_branch("om_supersessions", "s", "r"),
    )
    + " ORDER BY r.depth, r.ordinal"
)
# Rows of the three memory tables for some memory ids, kept to the branch ending at
# (segment ?, depth ?): the branch pieces come from the small segments table, the rows
# from each table's memory_id index (CROSS JOIN keeps the id lookup as the outer loop, so
# the cost does not grow with the memory on the branch).
MEMORY_SUBSET_SQL = """
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
# The same with the supersession rows of those ids (a superseded reflection names its
# successor), for stores that have the table.
MEMORY_SUBSET_WITH_SUPERSESSIONS_SQL = (
    MEMORY_SUBSET_SQL
    + """
UNION ALL
SELECT 3, s.depth, s.ordinal, s.memory_id, s.superseded_by, NULL, NULL
FROM om_supersessions s CROSS JOIN branch_path bp
WHERE s.memory_id IN ({marks}) AND s.segment_id = bp.segment_id
  AND s.depth BETWEEN bp.lo AND bp.hi"""
)
MEMORY_SUBSET_AT_LEAF_SQL = MEMORY_SUBSET_SQL.replace(
    """    SELECT s.segment_id, s.start_depth, ?2, s.parent_segment_id
    FROM segments s WHERE s.segment_id = ?1""",
    """    SELECT s.segment_id, s.start_depth, e.depth, s.parent_segment_id
    FROM sessions n JOIN entries e ON e.id = n.leaf_id
    JOIN segments s ON s.segment_id = e.segment_id WHERE n.session_id = ?1""",
).replace("?2", "?")
MEMORY_SUBSET_WITH_SUPERSESSIONS_AT_LEAF_SQL = MEMORY_SUBSET_WITH_SUPERSESSIONS_SQL.replace(
    """    SELECT s.segment_id, s.start_depth, ?2, s.parent_segment_id
    FROM segments s WHERE s.segment_id = ?1""",
    """    SELECT s.segment_id, s.start_depth, e.depth, s.parent_segment_id
    FROM sessions n JOIN entries e ON e.id = n.leaf_id
    JOIN segments s ON s.segment_id = e.segment_id WHERE n.session_id = ?1""",
).replace("?2", "?")
LAST_COMPACTION_SQL = f"""
SELECT entry_id FROM om_markers WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND record_type IN ('{FOLDED_TYPE}', '{COMPACTION_MARKER}') ORDER BY depth DESC LIMIT 1"""
# The newest memory record of one piece: om_markers rows less plain compactions.
MEMORY_HEAD_SQL = f"""
SELECT entry_id FROM om_markers WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND record_type <> '{COMPACTION_MARKER}' ORDER BY depth DESC LIMIT 1"""
PAGE_FORWARD_SQL = f"""
SELECT {ENTRY_COLUMNS} FROM entries
WHERE segment_id = ? AND depth BETWEEN ? AND ?
  AND kind = 'message' AND {ROLE_IS_ELIGIBLE}
ORDER BY depth LIMIT ?"""

# Per-session summaries (schema.sql: session_summary). An appended batch adds its counts;
# its latest timestamp replaces the stored one only when later (fixed-width UTC text).
ADD_TO_SUMMARY_SQL = """
INSERT INTO session_summary (session_id, entries, messages, leaves, last_activity)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT (session_id) DO UPDATE SET
    entries = session_summary.entries + excluded.entries,
    messages = session_summary.messages + excluded.messages,
    leaves = session_summary.leaves + excluded.leaves,
    last_activity = CASE
        WHEN excluded.last_activity > coalesce(session_summary.last_activity, '')
        THEN excluded.last_activity ELSE session_summary.last_activity END"""
SUMMARIES_SQL = """
SELECT s.session_id, m.entries, m.messages, m.leaves, m.last_activity, m.session_id
FROM sessions s LEFT JOIN session_summary m ON m.session_id = s.session_id
ORDER BY s.seq"""
# The same, computed from the entries: how the migration to schema version 2 backfills
# the table. prism_utc is utc_timestamp (timestamps compared as times).
SUMMARIES_FROM_ENTRIES_SQL = """
SELECT s.session_id AS session_id,
       (SELECT count(*) FROM entries e WHERE e.session_id = s.session_id) AS entries,
       (SELECT count(*) FROM entries e WHERE e.session_id = s.session_id
                                         AND e.kind = 'message') AS messages,
       (SELECT count(*) FROM segments g WHERE g.session_id = s.session_id) AS leaves,
       (SELECT max(prism_utc(e.timestamp)) FROM entries e
        WHERE e.session_id = s.session_id) AS last_activity
FROM sessions s ORDER BY s.seq"""

# Erasing one session (delete_session): its fold rows by the seq of the entry that
# recorded them (entries_session_seq finds those), then its entries, segments, summary
# and row. Each statement binds the session id once; the adapter runs them in order in
# one write transaction.
_OF_SESSION = "entry_seq IN (SELECT seq FROM entries WHERE session_id = ?)"
DELETE_SESSION_SQL = (
    *(
        f"DELETE FROM {table} WHERE {_OF_SESSION}"
        for table in (
            "om_observation_sources",
            "om_observations",
            "om_reflections",
            "om_drops",
            "om_markers",
            "om_scope_records",
            "om_supersessions",
        )
    ),
    "DELETE FROM entries WHERE session_id = ?",
    # The search index is a second copy of the text's terms: it goes with the session.
    "DELETE FROM search_terms WHERE segment_id IN (SELECT segment_id FROM segments"
    " WHERE session_id = ?)",
    "DELETE FROM search_blocks WHERE segment_id IN (SELECT segment_id FROM segments"
    " WHERE session_id = ?)",
    "DELETE FROM search_indexed WHERE segment_id IN (SELECT segment_id FROM segments"
    " WHERE session_id = ?)",
    # Segment ids are reused after the newest session goes: its pools must go too.
    "DELETE FROM om_live WHERE segment_id IN (SELECT segment_id FROM segments"
    " WHERE session_id = ?)",
    "DELETE FROM segments WHERE session_id = ?",
    "DELETE FROM session_summary WHERE session_id = ?",
    "DELETE FROM sessions WHERE session_id = ?",
)
# The tables a delete takes rows from (PostgreSQL names them to rewrite after one).
ERASED_TABLES = tuple(dict.fromkeys(statement.split()[2] for statement in DELETE_SESSION_SQL))
SESSION_ENTRY_COUNT_SQL = "SELECT count(*) FROM entries WHERE session_id = ?"


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


async def fetch_rows(conn: SqlReader, sql: str, params: Params = ()) -> builtins.list[Any]:
    return builtins.list(await conn.execute_fetchall(sql, params))


async def fetch_first_row(conn: SqlReader, sql: str, params: Params = ()) -> Any:
    """The first row of a query that always returns one."""
    return next(iter(await conn.execute_fetchall(sql, params)))
