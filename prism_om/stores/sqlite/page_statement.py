"""A page of messages in one SQLite statement (usually): SQLite's twin of PostgreSQL's
``PAGE_SQL`` (``stores/postgres/reads.py``).

A page used to take four statements: the leaf, the cursor on the branch, the branch
pieces, then the rows. Here one statement answers all four: a header row (the leaf, its
owner, the cursor's depth, kind and role), one row per branch piece, and the page's rows
from the cursor's own piece, read off the ``(segment_id, depth)`` index in page order
and stopped at ``:want``. SQLite has no ``LATERAL``, so rows of the pieces beyond the
cursor's are read by one more statement per piece (``PAGE_FORWARD_SQL`` /
``RECENT_MESSAGES_SQL``), and only when the cursor's piece runs out first: a page that
crosses a fork.

Rows: ``(0, leaf_id, owner, cursor depth, cursor kind, cursor role, NULL, NULL)``, then
``(1, segment_id, lo, hi, NULL, NULL, NULL, NULL)`` per piece, then
``(2, <the entry row of stores/_rows.entry_columns>)`` per message.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ...core.sources import ELIGIBLE_SOURCE_ROLES
from .._rows import PART_COLUMNS, entry_columns
from ..sql.statements import ENTRY_COLUMNS, PAGE_FORWARD_SQL, RECENT_MESSAGES_SQL

__all__ = [
    "CURSOR_SQL",
    "ENTRY_PART_ROWS_SQL",
    "PAGE_SQL",
    "PIECES_SQL",
    "PIECE_ROWS_SQL",
    "pieces_beyond",
]

_ROLES = ", ".join(f"'{role}'" for role in sorted(ELIGIBLE_SOURCE_ROLES))
_LEAF = {
    "session": """
    SELECT n.leaf_id AS leaf_id, e.session_id AS owner, e.segment_id AS segment_id,
           e.depth AS depth
    FROM (SELECT 1) one
    LEFT JOIN sessions n ON n.session_id = :session_id
    LEFT JOIN entries e ON e.id = n.leaf_id""",
    "given": """
    SELECT :leaf_id AS leaf_id, e.session_id AS owner, e.segment_id AS segment_id,
           e.depth AS depth
    FROM (SELECT 1) one LEFT JOIN entries e ON e.id = :leaf_id""",
}
# The leaf, then its branch's pieces walked back through the segments; {limit} is empty
# or a LIMIT on the pieces. Shared by the page and the pieces statements.
_BRANCH_PATH = """
WITH RECURSIVE leaf AS ({leaf}
),
branch_path(segment_id, lo, hi, parent_segment_id) AS (
    SELECT s.segment_id, s.start_depth, l.depth, s.parent_segment_id
    FROM leaf l JOIN segments s ON s.segment_id = l.segment_id
    WHERE l.owner = :session_id
    UNION ALL
    SELECT s.segment_id, s.start_depth, bp.lo - 1, s.parent_segment_id
    FROM branch_path bp JOIN segments s ON s.segment_id = bp.parent_segment_id{limit}
)"""
_HEAD = (
    _BRANCH_PATH.replace("{limit}", "")
    + """,
cursor_at AS (
    SELECT e.depth AS depth, e.kind AS kind, e.role AS role, bp.segment_id AS segment_id,
           bp.lo AS lo, bp.hi AS hi
    FROM branch_path bp CROSS JOIN entries e
    WHERE e.id = :cursor AND e.segment_id = bp.segment_id AND e.depth BETWEEN bp.lo AND bp.hi
)
SELECT 0, l.leaf_id, l.owner, c.depth, c.kind, c.role, NULL, NULL FROM leaf l LEFT JOIN cursor_at c
UNION ALL
SELECT 1, segment_id, lo, hi, NULL, NULL, NULL, NULL FROM branch_path
UNION ALL
SELECT * FROM (
    SELECT 2, {columns}
    FROM entries e
    WHERE e.segment_id = (
        SELECT segment_id FROM cursor_at WHERE kind = 'message' AND role IN ({roles})
    )
      AND {range}
      AND e.kind = 'message' AND e.role IN ({roles})
    ORDER BY e.depth {order} LIMIT :want
)"""
)
# The cursor's piece and bounds as scalar subqueries, not a join: constants to SQLite, so
# it walks the (segment_id, depth) index in page order and stops at :want (a join made
# it read the whole rest of the piece and sort it).
_WAYS = {
    "forward": (
        "e.depth BETWEEN (SELECT depth + 1 FROM cursor_at) AND (SELECT hi FROM cursor_at)",
        "ASC",
    ),
    "backward": (
        "e.depth BETWEEN (SELECT lo FROM cursor_at) AND (SELECT depth - 1 FROM cursor_at)",
        "DESC",
    ),
}
# Keyed by (direction, "session" | "given" leaf).
PAGE_SQL: dict[tuple[str, str], str] = {
    (way, leaf): _HEAD.format(
        leaf=_LEAF[leaf], columns=entry_columns("e"), roles=_ROLES, range=where, order=order
    )
    for way, (where, order) in _WAYS.items()
    for leaf in _LEAF
}

# The loop's page (``loop_page``) keeps each branch's pieces, and reads them with this
# only when it has none: the leaf's row ``(0, leaf_id, owner, NULL)``, then one row
# ``(1, segment_id, lo, hi)`` per piece, at most ``:max_pieces`` (the recursion stops
# there, so a branch of many forks costs no more than that before the hop takes over).
_PIECES = (
    _BRANCH_PATH.replace("{limit}", "\n    LIMIT :max_pieces")
    + """
SELECT 0, l.leaf_id, l.owner, NULL FROM leaf l
UNION ALL
SELECT 1, segment_id, lo, hi FROM branch_path"""
)
PIECES_SQL: dict[str, str] = {leaf: _PIECES.format(leaf=sql) for leaf, sql in _LEAF.items()}
# Where the cursor is, whichever branch it lies on: the caller places it on the pieces.
CURSOR_SQL = "SELECT segment_id, depth, kind, role FROM entries WHERE id = ?"

# The rows of one piece in page order (forward, backward), whole entry rows or message
# parts (``_rows.PART_COLUMNS``: three columns, where a part needs no more; fewer columns
# are measurably cheaper to step and convert, ~7 of ~24 µs for 21 rows).


def _piece_rows(sql: str, parts: bool) -> str:
    return sql.replace(ENTRY_COLUMNS, PART_COLUMNS, 1) if parts else sql


PIECE_ROWS_SQL: dict[tuple[bool, bool], str] = {
    (forward, parts): _piece_rows(PAGE_FORWARD_SQL if forward else RECENT_MESSAGES_SQL, parts)
    for forward in (True, False)
    for parts in (True, False)
}
assert all(PART_COLUMNS in PIECE_ROWS_SQL[way, True] for way in (True, False))
# The loop's ``page_messages`` (schema 7) reads a part's columns, the parent id and the
# data: every row of a page is a message of the page's own session (its branch's segments
# are the session's), so those two columns need not be read and converted per row.
ENTRY_PART_ROWS_SQL: dict[bool, str] = {
    way: PIECE_ROWS_SQL[way, True].replace(
        PART_COLUMNS, f"{PART_COLUMNS}, parent_id, CAST(data AS BLOB)", 1
    )
    for way in (True, False)
}


def pieces_beyond(
    pieces: Sequence[tuple[int, int, int]], depth: int, forward: bool
) -> Iterator[tuple[int, int, int]]:
    """The pieces (root first) past the cursor's at ``depth``, in page order: where a page
    that runs out of the cursor's piece goes on reading."""
    for segment_id, lo, hi in pieces if forward else reversed(pieces):
        if not ((lo <= depth) if forward else (hi >= depth)):
            yield segment_id, lo, hi
