"""The first rows of a page, read on the loop's own connection (``loop_reads``): no hop.

``page_statement.PAGE_SQL`` reads the branch's pieces on every page, and their number grows with
the forks of the branch: that read is not bounded, so it runs on the reader's thread
(one hop). Here the pieces of each branch paged (by session and leaf) are kept on the
loop's connection, inside ``PointConnection.snapshot``: they hold exactly while no other
connection has committed (its ``PRAGMA data_version``), and are read again after any
commit (an append moves the leaf; a deletion can reuse segment ids). With them known, a
page is two bounded statements: the cursor by id, then at most ``want`` rows of its
piece off the ``(segment_id, depth)`` index. A branch of more than ``POINT_MAX_PIECES``
pieces is left to the hop (``NotAPoint``).

The rows and the head are the ones ``PAGE_SQL`` gives, so ``SqliteReads.page_messages``
checks and parses them the same way; ``page_message_parts`` reads three columns of each
row instead (``_rows.PART_COLUMNS``), and ``page_messages`` four (``ENTRY_PART_ROWS_SQL``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...core.sources import ELIGIBLE_SOURCE_ROLES
from ..sql.placement import sorted_pieces
from ..sql.statements import ELIGIBLE_ROLES
from .loop_reads import NotAPoint, PointConnection
from .page_statement import CURSOR_SQL, PIECES_SQL

__all__ = ["POINT_MAX_PIECES", "PageHead", "PageStart", "point_page_start"]

POINT_MAX_PIECES = 32
"""Pieces (forks + 1) of a branch the loop reads: a branch of more takes the hop."""

PageHead = tuple[str | None, str | None, int | None, str | None, str | None]
"""(current leaf, its owner, the cursor's depth on the branch, its kind, its role)."""
PageStart = tuple[PageHead, list[tuple[int, int, int]], list[Any]]
"""The head, the branch's pieces (root first) and the entry rows of the cursor's piece."""


@dataclass(frozen=True, slots=True)
class _Branch:
    leaf_id: str | None
    owner: str | None
    pieces: list[tuple[int, int, int]]


def _branch(point: PointConnection, session_id: str, leaf_id: str | None) -> _Branch:
    key = ("page", session_id, leaf_id)
    kept = point.kept.get(key)
    if isinstance(kept, _Branch):
        return kept
    params = {
        "session_id": session_id,
        "leaf_id": leaf_id,
        "max_pieces": POINT_MAX_PIECES + 1,
    }
    rows = point.fetch(PIECES_SQL["session" if leaf_id is None else "given"], params)
    _, current, owner, _ = rows[0]
    pieces = sorted_pieces(row[1:] for row in rows[1:])
    if len(pieces) > POINT_MAX_PIECES:
        raise NotAPoint
    branch = _Branch(current, owner, pieces)
    if pieces:  # a branch found: a missing one raises, and is not worth keeping
        point.kept[key] = branch
    return branch


def point_page_start(
    point: PointConnection,
    session_id: str,
    leaf_id: str | None,
    cursor: str,
    want: int,
    forward: bool,
    rows_sql: str,
) -> PageStart:
    """``page_statement.PAGE_SQL``'s answer, from the kept pieces; call inside
    ``PointConnection.snapshot()``.
    ``rows_sql``: the statement of the rows (one of ``page_statement.PIECE_ROWS_SQL`` or
    ``page_statement.ENTRY_PART_ROWS_SQL`` for the direction), whose columns they have."""
    branch = _branch(point, session_id, leaf_id)
    head: PageHead = (branch.leaf_id, branch.owner, None, None, None)
    found = point.fetch(CURSOR_SQL, (cursor,)) if branch.pieces else []
    if not found:
        return head, branch.pieces, []
    segment_id, depth, kind, role = found[0]
    for piece_segment, lo, hi in branch.pieces:
        if piece_segment == segment_id and lo <= depth <= hi:
            break
    else:
        return head, branch.pieces, []
    head = (branch.leaf_id, branch.owner, depth, kind, role)
    if kind != "message" or role not in ELIGIBLE_SOURCE_ROLES:
        return head, branch.pieces, []
    if forward:
        params = (segment_id, depth + 1, hi, *ELIGIBLE_ROLES, want)
    else:
        params = (segment_id, lo, depth - 1, *ELIGIBLE_ROLES, want)
    return head, branch.pieces, point.fetch(rows_sql, params)
