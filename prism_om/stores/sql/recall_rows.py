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
from typing import Any

from ...core.ledger import ObservationalMemoryLedger, RecordedObservation
from ...core.records import Observation
from ..base import SOURCES_READ_AHEAD
from .memory_folds import ledger_from_rows

__all__ = [
    "SOURCES_READ_AHEAD",
    "SOURCE_ROW",
    "recall_ledger",
    "recall_statement",
    "split_recall_rows",
]

SOURCE_ROW = 4
"""The kind column of a source entry row (0-3: observation, reflection, drop and
supersession rows, as in ``memory_subset``)."""


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
SELECT 0, o.depth, o.ordinal, o.memory_id, o.entry_id, o.recorded_at, o.body
FROM om_observations o CROSS JOIN branch_path bp
WHERE o.memory_id = ?2 AND {_ON_BRANCH.format(t="o")}
UNION ALL
SELECT 1, r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body
FROM om_reflections r CROSS JOIN branch_path bp
WHERE r.memory_id = ?2 AND {_ON_BRANCH.format(t="r")}
UNION ALL
SELECT 2, d.depth, d.ordinal, d.memory_id, NULL, NULL, NULL
FROM om_drops d CROSS JOIN branch_path bp
WHERE d.memory_id = ?2 AND {_ON_BRANCH.format(t="d")}"""
# A superseded reflection names its successor.
_SUPERSESSIONS = f"""
UNION ALL
SELECT 3, s.depth, s.ordinal, s.memory_id, s.superseded_by, NULL, NULL
FROM om_supersessions s CROSS JOIN branch_path bp
WHERE s.memory_id = ?2 AND {_ON_BRANCH.format(t="s")}"""
# The columns line up with the memory rows': the kind, then the six of an entry row.
_SOURCES = f"""
UNION ALL
SELECT {SOURCE_ROW}, e.id, e.session_id, e.parent_id, e.kind, e.timestamp, CAST(e.body AS BLOB)
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
