"""PostgreSQL reads in one round trip each: a page, and a recall's memory rows with sources.

``SqliteReads`` answers a page with four statements (leaf, cursor, branch pieces, rows)
and ``SqlReads`` a recall with two (memory rows, then source entries). In-process SQLite
pays little per statement; a server pays a network round trip each, which was most of
their time.
So these reads are single PostgreSQL statements, written for PostgreSQL only (each one
a listed dialect difference):

- ``PAGE_SQL``: the leaf (given or the session's), the branch pieces, the cursor's
  position and the page's rows together. Each piece reads at most a page of rows off the
  ``(segment_id, depth)`` index in a ``LATERAL`` subquery, which SQLite does not have.
  It runs with the page's row limit written in (``page_statement``), so that its
  prepared statement keeps a generic plan.
- ``MEMORY_SUBSET_SQL``: ``memory_subset``'s rows, plus the source entries the found
  observations cite (``om_observation_sources``), which ``get_many`` then serves.
- ``BODIES_BY_IDS_SQL``: ``get``/``get_many`` with ``= ANY(array)``, one statement text
  (prepared once per connection) whatever the number of ids (``BODY_BY_ID_SQL`` for one).

Everything they return is checked and parsed as in ``SqlReads``, with the same errors
in the same order. A read that meets damage makes this store object refuse later writes
(``SqlReads._mark_damaged``); the server owns its files, so no note is left beside them.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Iterable
from typing import Any, Literal

from ...core.ledger import ObservationalMemoryLedger
from ...core.limits import PAGE_LIMIT_HARD_CAP
from ...core.sources import ELIGIBLE_SOURCE_ROLES
from ...entries import SessionEntry
from ...errors import CorruptStoreError
from ..arguments import check_entry_id, check_id_list, check_leaf_id, check_page_args
from ..base import SOURCES_READ_AHEAD
from ..sql.damage import fold_rows_parse
from ..sql.memory_folds import ledger_from_rows
from ..sql.placement import check_leaf_session, check_page_head
from ..sql.reads import SqlReads
from ..sql.recall_rows import (
    DROP_ROW,
    LEAF_ROW,
    OBSERVATION_ROW,
    REFLECTION_ROW,
    SOURCE_ROW,
    SUPERSESSION_ROW,
    recall_ledger,
    split_recall_rows,
)
from .connection import PoolReader

__all__ = [
    "BODIES_BY_IDS_SQL",
    "BODY_BY_ID_SQL",
    "BOUNDED_KEYS",
    "MEMORY_SUBSET_SQL",
    "PAGE_SQL",
    "PostgresReads",
    "page_statement",
]

# Reads by at most this many keys (ids asked, rows of a page) are bounded reads: they run
# under a deadline (the store's timeout_s + 1 s; connection.BOUNDED_READS).
BOUNDED_KEYS = 1000
# Source entries read ahead with a recall's memory rows: enough for the default window of
# recalled sources; an observation citing more has the rest fetched by get_many.
_ROLES = ", ".join(f"'{role}'" for role in sorted(ELIGIBLE_SOURCE_ROLES))

# The branch end and its pieces. At the session's leaf, ``leaf`` is one row whose leaf_id
# is NULL for an unknown session and whose owner is NULL when the leaf has no entry row;
# at a given leaf, owner is that entry's session (NULL when it does not exist). The
# pieces start only from a leaf of the asked session, so a leaf of another session yields
# no rows (the caller raises first).
_LEAF = {
    "session": """
    SELECT n.leaf_id, e.session_id AS owner, e.segment_id, e.depth
    FROM (SELECT 1) one
    LEFT JOIN sessions n ON n.session_id = %(session_id)s
    LEFT JOIN entries e ON e.id = n.leaf_id""",
    "given": """
    SELECT %(leaf_id)s::text AS leaf_id, e.session_id AS owner, e.segment_id, e.depth
    FROM (SELECT 1) one LEFT JOIN entries e ON e.id = %(leaf_id)s""",
}
_BRANCH = """
WITH RECURSIVE leaf AS ({leaf}
),
branch_path(segment_id, lo, hi, parent_segment_id) AS (
    SELECT s.segment_id, s.start_depth, l.depth, s.parent_segment_id
    FROM leaf l JOIN segments s ON s.segment_id = l.segment_id
    WHERE l.owner = %(session_id)s
    UNION ALL
    SELECT s.segment_id, s.start_depth, bp.lo - 1, s.parent_segment_id
    FROM branch_path bp JOIN segments s ON s.segment_id = bp.parent_segment_id
)"""

# A page: one header row when the cursor is not an eligible message on the branch, else
# a row per message (the header columns repeated). A row's session is the branch's owner
# (a parent is always of its child's session) and its kind 'message' (the filter), so
# neither is sent: fewer values per row to send and convert. The per-piece LATERAL reads at most a
# page off the index in branch order; the outer LIMIT keeps the first page across pieces.
_PAGE = f""",
cursor_at AS (
    SELECT e.depth, e.kind, e.role FROM entries e CROSS JOIN branch_path bp
    WHERE e.id = %(cursor)s AND e.segment_id = bp.segment_id
      AND e.depth BETWEEN bp.lo AND bp.hi
)
SELECT l.leaf_id, l.owner, c.depth, c.kind, c.role, r.id, r.parent_id, r.timestamp, r.body,
       r.data
FROM leaf l
LEFT JOIN cursor_at c ON true
LEFT JOIN LATERAL (
    SELECT p.depth, p.id, p.parent_id, p.timestamp, p.body, p.data
    FROM branch_path bp CROSS JOIN LATERAL (
        SELECT e.depth, e.id, e.parent_id, e.timestamp, e.body, e.data
        FROM entries e
        WHERE e.segment_id = bp.segment_id AND {{range}}
          AND e.kind = 'message' AND e.role IN ({_ROLES})
        ORDER BY e.depth {{order}} LIMIT %(want)s
    ) p
    WHERE c.kind = 'message' AND c.role IN ({_ROLES})
    ORDER BY p.depth {{order}} LIMIT %(want)s
) r ON true
ORDER BY r.depth {{order}}"""
_PAGE_WAYS = {
    "forward": ("e.depth BETWEEN greatest(bp.lo, c.depth + 1) AND bp.hi", "ASC"),
    "backward": ("e.depth BETWEEN bp.lo AND least(bp.hi, c.depth - 1)", "DESC"),
}
# Keyed by (direction, "session" | "given" leaf).
PAGE_SQL: dict[tuple[str, str], str] = {
    (way, leaf): _BRANCH.format(leaf=_LEAF[leaf]) + _PAGE.format(range=where, order=order)
    for way, (where, order) in _PAGE_WAYS.items()
    for leaf in _LEAF
}


@functools.lru_cache(maxsize=4 * (PAGE_LIMIT_HARD_CAP + 1))
def page_statement(direction: str, leaf: str, want: int) -> str:
    """``PAGE_SQL[(direction, leaf)]`` with its row limit written in as a number.

    A prepared statement runs on a generic plan only when that plan's estimated cost is
    no higher than the custom plans' it made for its first five runs. Under a bound
    ``LIMIT`` the planner assumes a tenth of the rows the index range may hold: on a
    table of ~50k entries or more that is above the page's 21, the generic plan looks
    dearer than it is, and every page was planned again (~200 µs, more than the rest of
    the statement). With the limit in the text, both plans are costed alike and the
    prepared statement keeps its generic plan; there is one text per page size (at most
    ``PAGE_LIMIT_HARD_CAP`` + 1 values of ``want``, each prepared once per connection).
    """
    return PAGE_SQL[(direction, leaf)].replace("%(want)s", str(int(want)))


# Rows of ``recall_rows``' kinds and columns (the kind and six; split by
# ``split_recall_rows``, as SQLite's recall statement is): the memory rows of the ids, the
# source entries the found observations cite (at most SOURCES_READ_AHEAD each, by a
# LATERAL subquery), and at a given leaf its row, to be checked against the session.
# {match} is ``= %(id)s`` for one id (cheaper to bind and plan) or ``= ANY(%(ids)s)``.
_SUBSET = f""",
found AS (
    SELECT o.entry_seq, o.ordinal, o.depth, o.memory_id, o.entry_id, o.recorded_at, o.body
    FROM om_observations o CROSS JOIN branch_path bp
    WHERE o.memory_id {{match}} AND o.segment_id BETWEEN bp.segment_id AND bp.segment_id
      AND o.depth BETWEEN bp.lo AND bp.hi
)
{{header}}SELECT {OBSERVATION_ROW}, f.depth, f.ordinal, f.memory_id, f.entry_id, f.recorded_at,
       f.body, NULL, NULL, NULL
FROM found f
UNION ALL
SELECT {REFLECTION_ROW}, r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body,
       NULL, NULL, NULL
FROM om_reflections r CROSS JOIN branch_path bp
WHERE r.memory_id {{match}} AND r.segment_id BETWEEN bp.segment_id AND bp.segment_id
  AND r.depth BETWEEN bp.lo AND bp.hi
UNION ALL
SELECT {DROP_ROW}, d.depth, d.ordinal, d.memory_id, NULL, NULL, NULL, NULL, NULL, NULL
FROM om_drops d CROSS JOIN branch_path bp
WHERE d.memory_id {{match}} AND d.segment_id BETWEEN bp.segment_id AND bp.segment_id
  AND d.depth BETWEEN bp.lo AND bp.hi
{{supersessions}}UNION ALL
SELECT {SOURCE_ROW}, NULL::bigint, NULL::bigint, e.id, e.session_id, e.timestamp, e.body,
       e.parent_id, e.kind, e.data
FROM found f CROSS JOIN LATERAL (
    SELECT s.source_entry_id FROM om_observation_sources s
    WHERE s.entry_seq = f.entry_seq AND s.ordinal = f.ordinal
    LIMIT {SOURCES_READ_AHEAD}
) w JOIN entries e ON e.id = w.source_entry_id"""
_MATCH = {"one": "= %(id)s", "many": "= ANY(%(ids)s)"}
# Keyed by ("one" | "many" ids, "session" | "given" leaf).
# Only a given leaf needs its row back, to be checked against the session.
_HEADER = {
    "session": "",
    "given": f"SELECT {LEAF_ROW}, NULL::bigint, NULL::bigint, l.owner, l.leaf_id, NULL, NULL,"
    " NULL, NULL, NULL"
    " FROM leaf l\n"
    "UNION ALL\n",
}
# A supersession of one of the ids (entry_id: the superseding reflection;
# docs/design.md, "Supersession of reflections").
_SUPERSESSIONS = f"""UNION ALL
SELECT {SUPERSESSION_ROW}, s.depth, s.ordinal, s.memory_id, s.superseded_by, NULL, NULL, NULL,
       NULL, NULL
FROM om_supersessions s CROSS JOIN branch_path bp
WHERE s.memory_id {{match}} AND s.segment_id BETWEEN bp.segment_id AND bp.segment_id
  AND s.depth BETWEEN bp.lo AND bp.hi
"""
# Keyed by ("one" | "many" ids, "session" | "given" leaf).
MEMORY_SUBSET_SQL: dict[tuple[str, str], str] = {
    (ids, leaf): _BRANCH.format(leaf=_LEAF[leaf])
    + _SUBSET.format(
        match=match, header=_HEADER[leaf], supersessions=_SUPERSESSIONS.format(match=match)
    )
    for ids, match in _MATCH.items()
    for leaf in _LEAF
}
_ENTRY_COLUMNS = "id, session_id, parent_id, kind, timestamp, body, data"
BODIES_BY_IDS_SQL = f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = ANY(%s)"
BODY_BY_ID_SQL = f"SELECT {_ENTRY_COLUMNS} FROM entries WHERE id = %s"


class PostgresReads(SqlReads):
    """``SqlReads`` with a page, a recall's rows and lookups by id in one statement."""

    _reader: PoolReader

    async def _fetch_native(self, sql: str, params: Any, keys: int) -> builtins.list[Any]:
        """All rows of one PostgreSQL-only statement, errors translated; one of at most
        ``BOUNDED_KEYS`` keys (ids, a page) runs under the reader's deadline."""
        self._check_open()
        reader = self._reader
        try:
            return await reader.fetch_native(sql, params, bounded=keys <= BOUNDED_KEYS)
        except CorruptStoreError as exc:
            self._mark_damaged(exc)
            raise

    async def get(self, entry_id: str) -> SessionEntry | None:
        check_entry_id(entry_id)
        found = await self.get_many([entry_id])
        return found.get(entry_id)

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist, in one statement."""
        wanted = sorted(set(check_id_list(entry_ids, "entry_ids")))
        self._open_reader()
        found: dict[str, SessionEntry] = {}
        rows: builtins.list[Any] = []
        if wanted:
            # One id binds as text, cheaper than an array.
            sql, param = (
                (BODY_BY_ID_SQL, wanted[0]) if len(wanted) == 1 else (BODIES_BY_IDS_SQL, wanted)
            )
            rows = await self._fetch_native(sql, (param,), len(wanted))
        for entry in self._parse_rows(rows):
            found[entry.id] = entry
        return found

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger restricted to ``memory_ids``, in one statement (its source rows, read
        for ``memory_with_sources``, are left unused here: nothing is kept between calls)."""
        wanted = sorted(set(check_id_list(memory_ids, "memory_ids", memory=True)))
        check_leaf_id(leaf_id)
        session_id = self._session(session_id)
        if not wanted:
            return ObservationalMemoryLedger()
        params = {"session_id": session_id, "leaf_id": leaf_id, "id": wanted[0], "ids": wanted}
        key = ("one" if len(wanted) == 1 else "many", "session" if leaf_id is None else "given")
        rows = await self._fetch_native(MEMORY_SUBSET_SQL[key], params, len(wanted))
        # Its source rows, read for memory_with_sources, are left unused here.
        split = split_recall_rows(rows)
        if leaf_id is not None:
            for owner, _ in split.leaves:
                check_leaf_session(leaf_id, session_id, owner, self.url)
        with fold_rows_parse(self.url, session_id):
            return ledger_from_rows(
                sorted(split.observations),
                sorted(split.reflections),
                sorted(split.drops),
                [],
                sorted(split.supersessions),
            )

    async def memory_with_sources(
        self, session_id: str, memory_id: str
    ) -> tuple[ObservationalMemoryLedger, dict[str, SessionEntry]]:
        """``memory_subset(session_id, [memory_id])`` at the session's leaf with the
        source entries it cites (``SOURCES_READ_AHEAD`` at most), in one statement."""
        session_id = self._session(session_id)
        memory_id = check_entry_id(memory_id, "memory_id")
        params = {"session_id": session_id, "id": memory_id}
        sql = MEMORY_SUBSET_SQL[("one", "session")]
        rows = await self._fetch_native(sql, params, 1)
        split = split_recall_rows(rows)
        with fold_rows_parse(self.url, session_id):
            ledger = recall_ledger(*split[:3], sorted(split.supersessions))
        return ledger, {entry.id: entry for entry in self._parse_rows(split.sources)}

    async def _page_rows(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"],
        leaf_id: str | None,
        parts: bool,
    ) -> builtins.list[Any]:
        """The page's entry rows (``parts``: ``_rows.PART_COLUMNS`` rows), for
        ``SqlReads.page_messages`` and ``page_message_parts``: one statement."""
        check_entry_id(cursor, "cursor")
        check_page_args(limit, direction)
        check_leaf_id(leaf_id)
        session_id = self._session(session_id)
        params = {"session_id": session_id, "leaf_id": leaf_id, "cursor": cursor}
        # One more row than the page tells whether another page follows.
        sql = page_statement(direction, "session" if leaf_id is None else "given", limit + 1)
        rows = await self._fetch_native(sql, params, limit)
        current, owner, depth, kind, role = rows[0][:5]
        check_page_head(
            session_id=session_id,
            leaf_id=leaf_id,
            cursor=cursor,
            head=(current, owner, depth, kind, role),
            url=self.url,
        )
        if parts:
            return [(row[5], row[7], row[8]) for row in rows if row[5] is not None]
        # Whole entry rows (``_rows.entry_columns``) for ``page_messages``.
        return [
            (row[5], owner, row[6], "message", row[7], row[8], row[9])
            for row in rows
            if row[5] is not None
        ]
