"""A recall's memory rows and the source entries they cite, in one statement on the loop.

``memory_subset`` then ``get_many`` made a recall by id two statements, each driven
through the store's read coroutines. Here the id's fold rows (observations,
reflections, drops, supersessions) and the entries its observations cite (at most
``SOURCES_READ_AHEAD``, through ``om_observation_sources``) come from
one statement on the loop's read-only connection (``loop_reads``): one snapshot of the file,
so a second writer can never pair the rows of one state with the sources of another.

Nothing is kept between calls: every recall reads the file as it stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from ...core.ledger import ObservationalMemoryLedger, RecordedObservation
from ...core.records import Observation
from ..base import SOURCES_READ_AHEAD
from .memory_folds import ledger_from_rows

__all__ = [
    "LEAF_ROW",
    "RecallRows",
    "SOURCES_READ_AHEAD",
    "SOURCE_ROW",
    "recall_ledger",
    "recall_statement",
    "split_recall_rows",
]

# The kind column (the first) of a recall statement's rows, on both engines. Every row
# has the kind and nine columns, typed alike per column (PostgreSQL's UNION wants it):
# (depth, ordinal, memory_id, entry_id, recorded_at, body, parent_id, entry_kind,
# entry_data). A memory row fills the first six from its fold table (a supersession's
# entry_id column holds the superseding reflection); a source row is the cited entry,
# with depth and ordinal NULL and (memory_id, entry_id, recorded_at, body, parent_id,
# entry_kind, entry_data) its (id, session_id, timestamp, body, parent_id, kind, data:
# a message entry's data, schema version 7); a leaf row (PostgreSQL's read at a
# given leaf) holds the leaf's session and id in the memory_id and entry_id columns.
OBSERVATION_ROW, REFLECTION_ROW, DROP_ROW, SUPERSESSION_ROW, SOURCE_ROW, LEAF_ROW = range(6)


# ?1 is the session, ?2 the memory id. Each part finds the id's rows by its memory_id
# index, then keeps those on a branch piece: ``+bp.segment_id`` scans the few pieces
# instead of having SQLite build an automatic index on them for each part of each call
# (on a 10k-entry bench file that statement once measured 125 µs against 11 µs).
_BRANCH = """
WITH RECURSIVE branch_path(segment_id, lo, hi, parent_segment_id) AS (
    SELECT s.segment_id, s.start_depth, e.depth, s.parent_segment_id
    FROM sessions n JOIN entries e ON e.id = n.leaf_id
    JOIN segments s ON s.segment_id = e.segment_id WHERE n.session_id = ?1
    UNION ALL
    SELECT s.segment_id, s.start_depth, bp.lo - 1, s.parent_segment_id
    FROM branch_path bp JOIN segments s ON s.segment_id = bp.parent_segment_id
)"""
_ON_BRANCH = "{t}.segment_id = +bp.segment_id AND {t}.depth BETWEEN bp.lo AND bp.hi"
_MEMORY = f"""
SELECT {OBSERVATION_ROW}, o.depth, o.ordinal, o.memory_id, o.entry_id, o.recorded_at, o.body,
       NULL, NULL, NULL
FROM om_observations o CROSS JOIN branch_path bp
WHERE o.memory_id = ?2 AND {_ON_BRANCH.format(t="o")}
UNION ALL
SELECT {REFLECTION_ROW}, r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body,
       NULL, NULL, NULL
FROM om_reflections r CROSS JOIN branch_path bp
WHERE r.memory_id = ?2 AND {_ON_BRANCH.format(t="r")}
UNION ALL
SELECT {DROP_ROW}, d.depth, d.ordinal, d.memory_id, NULL, NULL, NULL, NULL, NULL, NULL
FROM om_drops d CROSS JOIN branch_path bp
WHERE d.memory_id = ?2 AND {_ON_BRANCH.format(t="d")}"""
# A superseded reflection names its successor.
_SUPERSESSIONS = f"""
UNION ALL
SELECT {SUPERSESSION_ROW}, s.depth, s.ordinal, s.memory_id, s.superseded_by, NULL, NULL, NULL,
       NULL, NULL
FROM om_supersessions s CROSS JOIN branch_path bp
WHERE s.memory_id = ?2 AND {_ON_BRANCH.format(t="s")}"""
# A source row, in the columns above (OBSERVATION_ROW's comment).
_SOURCES = f"""
UNION ALL
SELECT {SOURCE_ROW}, NULL, NULL, e.id, e.session_id, e.timestamp, CAST(e.body AS BLOB),
       e.parent_id, e.kind, CAST(e.data AS BLOB)
FROM (
    SELECT s.source_entry_id
    FROM om_observations o CROSS JOIN branch_path bp
    JOIN om_observation_sources s ON s.entry_seq = o.entry_seq AND s.ordinal = o.ordinal
    WHERE o.memory_id = ?2 AND {_ON_BRANCH.format(t="o")}
    LIMIT {SOURCES_READ_AHEAD}
) w JOIN entries e ON e.id = w.source_entry_id"""

_SQL = _BRANCH + _MEMORY + _SUPERSESSIONS + _SOURCES


def recall_statement(session_id: str, memory_id: str) -> tuple[str, list[str]]:
    """The statement and its values: ``memory_id``'s rows on the session's branch, then
    the entries its observations there cite."""
    return _SQL, [session_id, memory_id]


class RecallRows(NamedTuple):
    """A recall statement's rows by kind, the memory rows shaped as ``ledger_from_rows``
    takes them (not yet sorted)."""

    observations: list[Any]
    reflections: list[Any]
    drops: list[Any]
    supersessions: list[Any]
    sources: list[Sequence[Any]]
    leaves: list[tuple[Any, Any]]


def split_recall_rows(rows: Sequence[Sequence[Any]]) -> RecallRows:
    """The rows of a recall statement (either engine's) by their kind column."""
    split = RecallRows([], [], [], [], [], [])
    for row in rows:
        kind = row[0]
        if kind == OBSERVATION_ROW:
            split.observations.append(row[1:7])
        elif kind == SOURCE_ROW:
            # As an entry row: (id, session_id, parent_id, kind, timestamp, body, data).
            split.sources.append((row[3], row[4], row[7], row[8], row[5], row[6], row[9]))
        elif kind == REFLECTION_ROW:
            split.reflections.append(row[1:7])
        elif kind == DROP_ROW:
            split.drops.append(row[1:4])
        elif kind == SUPERSESSION_ROW:
            split.supersessions.append(row[1:5])
        elif kind == LEAF_ROW:
            split.leaves.append((row[3], row[4]))
        else:
            raise AssertionError(f"a recall row of unknown kind {kind!r}")
    return split


def recall_ledger(
    observations: list[Any],
    reflections: list[Any],
    drops: list[Any],
    supersessions: list[Any],
) -> ObservationalMemoryLedger:
    """``ledger_from_rows`` of one id's rows (``split_recall_rows``), built directly in
    the usual case: one observation row and no reflection row.

    Then the ledger holds that observation, dropped when a drop row of it lies deeper
    on the branch; no marker or supersession row can change it. Any other shape (the id
    recorded twice, a reflection) goes through ``ledger_from_rows``. The caller wraps
    this in ``fold_rows_parse``, which reports a body that does not parse.
    """
    if len(observations) != 1 or reflections:
        return ledger_from_rows(
            sorted(observations), sorted(reflections), sorted(drops), [], supersessions
        )
    ((depth, _, memory_id, entry_id, recorded_at, body),) = observations
    recorded = RecordedObservation(
        Observation.model_validate_json(body), entry_id, recorded_at, depth
    )
    dropped = any(drop[0] > depth for drop in drops)
    return ObservationalMemoryLedger(
        observations=(recorded,), dropped_observation_ids=(memory_id,) if dropped else ()
    )
