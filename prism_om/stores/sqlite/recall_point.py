"""A recall's memory rows and the source entries they cite, in one statement on the loop.

``memory_subset`` then ``get_many`` made a recall by id two statements, each driven
through the store's read coroutines. Here the id's fold rows (observations,
reflections, drops, supersessions) and the entries its observations cite (at most
``SOURCES_READ_AHEAD`` per observation, through ``om_observation_sources``) come from
one statement on the loop's read-only connection (``point``): one snapshot of the file,
so a second writer can never pair the rows of one state with the sources of another.

Nothing is kept between calls: every recall reads the file as it stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .sql import MEMORY_SUBSET_AT_LEAF_SQL, MEMORY_SUBSET_WITH_SUPERSESSIONS_AT_LEAF_SQL

__all__ = ["SOURCES_READ_AHEAD", "SOURCE_ROW", "recall_statement", "split_recall_rows"]

SOURCES_READ_AHEAD = 64
"""Source entries read with the memory rows, per observation; any others of the window
asked are read by id afterwards (``get_many``)."""

SOURCE_ROW = 4
"""The kind column of a source entry row (0-3 are ``memory_subset``'s kinds)."""

# The columns line up with the memory rows': kind, then the six of an entry row.
_SOURCES = f"""
UNION ALL
SELECT {SOURCE_ROW}, e.id, e.session_id, e.parent_id, e.kind, e.timestamp, CAST(e.body AS BLOB)
FROM (
    SELECT s.source_entry_id
    FROM om_observations o CROSS JOIN branch_path bp
    JOIN om_observation_sources s ON s.entry_seq = o.entry_seq AND s.ordinal = o.ordinal
    WHERE o.memory_id = ? AND o.segment_id = bp.segment_id AND o.depth BETWEEN bp.lo AND bp.hi
    LIMIT {SOURCES_READ_AHEAD}
) w JOIN entries e ON e.id = w.source_entry_id"""

_SQL = {
    False: MEMORY_SUBSET_AT_LEAF_SQL.format(marks="?") + _SOURCES,
    True: MEMORY_SUBSET_WITH_SUPERSESSIONS_AT_LEAF_SQL.format(marks="?") + _SOURCES,
}


def recall_statement(
    session_id: str, memory_id: str, with_supersessions: bool
) -> tuple[str, list[str]]:
    """The statement and its values: ``memory_id``'s rows on the session's branch, then
    the entries its observations there cite."""
    parts = 4 if with_supersessions else 3
    # ?1 is the session; each part (and the sources) binds the id once more.
    return _SQL[with_supersessions], [session_id] + [memory_id] * (parts + 1)


def split_recall_rows(
    rows: Sequence[Sequence[Any]],
) -> tuple[list[Any], list[Any], list[Any], list[Any], list[Sequence[Any]]]:
    """(observations, reflections, drops, supersessions, source entry rows) of the rows,
    the first four shaped as ``ledger_from_rows`` takes them (not yet sorted)."""
    observations, reflections, drops, supersessions, sources = [], [], [], [], []
    for row in rows:
        kind = row[0]
        if kind == SOURCE_ROW:
            sources.append(row[1:])
        elif kind == 0:
            observations.append(row[1:])
        elif kind == 1:
            reflections.append(row[1:])
        elif kind == 2:
            drops.append(row[1:4])
        else:
            # entry_id's column holds the superseding reflection here.
            supersessions.append(row[1:5])
    return observations, reflections, drops, supersessions, sources
