"""The live pool (schema version 4): what a segment's tail keeps active, kept at append.

``live_ledger`` of a long session used to read every marker row of the branch and test
every recorded observation against the drops (anti-joins): work that grows with the
transcript although the dropper keeps the active memory small. ``om_live`` holds, per
segment, the memory live at the segment's tail, by reference to its fold rows:

- kind 0 / 1: a live observation / reflection (``item`` its memory id; ``entry_seq`` and
  ``ordinal`` its ``om_observations`` / ``om_reflections`` row);
- kind 2 / 3: the latest marker of each record type / the latest one with a coverage
  cursor (``item`` the record type; ``entry_seq`` the ``om_markers`` row).

A segment's pool is made the first time a memory record lands on it (from the indexed
fold of its branch, once) and then follows each memory record appended to its tail: an
observation or reflection adds a row, a drop or a supersession removes one, a marker
replaces its type's row. Messages never touch it. A leaf that is not its segment's tail
(an older point of the branch), or a segment that has no pool yet (a fork that recorded
no memory since), reads the indexed fold instead, so a branch forked before a drop still
sees the dropped observation as live. Both the SQLite and the PostgreSQL adapter run
this on their writer connection (the latter through the SQL transpiler).
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .connection import SqlConnection
from .statements import _not_named_on_branch, branch_rows_sql

if TYPE_CHECKING:
    from .memory_folds import FoldRows
    from .placement import PlacedEntry

OBSERVATION, REFLECTION, LAST_MARKER, LAST_COVERAGE = 0, 1, 2, 3

_INSERT_SQL = (
    "INSERT INTO om_live (segment_id, kind, item, entry_seq, ordinal) VALUES (?, ?, ?, ?, ?)"
)
# The first record of a memory id wins, as in the fold.
_ADD_SQL = _INSERT_SQL + " ON CONFLICT (segment_id, kind, item) DO NOTHING"
_REPLACE_SQL = (
    _INSERT_SQL + " ON CONFLICT (segment_id, kind, item) DO UPDATE SET"
    " entry_seq = excluded.entry_seq, ordinal = excluded.ordinal"
)
_REMOVE_SQL = "DELETE FROM om_live WHERE segment_id = ? AND kind = ? AND item = ?"
_POOLED_SQL = "SELECT 1 FROM om_live WHERE segment_id = ? LIMIT 1"


# The live rows of a branch, by the indexed fold (what a new pool starts from).
_LIVE_ROWS_SQL = {
    OBSERVATION: branch_rows_sql(
        "o.depth, o.ordinal, o.memory_id, o.entry_seq",
        "om_observations",
        "o",
        where=_not_named_on_branch("om_drops", "d", "o"),
    ),
    REFLECTION: branch_rows_sql(
        "r.depth, r.ordinal, r.memory_id, r.entry_seq",
        "om_reflections",
        "r",
        where=_not_named_on_branch("om_supersessions", "s", "r"),
    ),
}
_MARKER_ROWS_SQL = (
    branch_rows_sql("m.depth, m.entry_seq, m.record_type, m.covers_up_to_id", "om_markers", "m")
    + " ORDER BY m.depth"
)

# A leaf's pool, in three reads (``live_ledger`` reads them in this order): its memory
# rows, then its marker rows, the latter only while the leaf is its segment's tail. A
# pool always holds marker rows, so none means "read the indexed fold instead". A tail
# only moves deeper, and a pool only changes when its tail does, so markers found after
# the memory rows prove those rows were the leaf's.
_TAIL = (
    "NOT EXISTS (SELECT 1 FROM entries t"
    " WHERE t.segment_id = :leaf_segment AND t.depth = :leaf_depth + 1)"
)
POOL_SQL = {
    "observations": """
SELECT o.depth, o.ordinal, o.memory_id, o.entry_id, o.recorded_at, o.body
FROM om_live l JOIN om_observations o ON o.entry_seq = l.entry_seq AND o.ordinal = l.ordinal
WHERE l.segment_id = :leaf_segment AND l.kind = 0""",
    "reflections": """
SELECT r.depth, r.ordinal, r.memory_id, r.entry_id, r.recorded_at, r.body
FROM om_live l JOIN om_reflections r ON r.entry_seq = l.entry_seq AND r.ordinal = l.ordinal
WHERE l.segment_id = :leaf_segment AND l.kind = 1""",
    "markers": f"""
SELECT m.depth, m.entry_id, m.record_type, m.covers_up_to_id
FROM om_live l JOIN om_markers m ON m.entry_seq = l.entry_seq
WHERE l.segment_id = :leaf_segment AND l.kind IN (2, 3) AND {_TAIL}
ORDER BY m.depth""",
}


async def start_pool(conn: SqlConnection, segment_id: int, depth: int) -> None:
    """Make the pool of ``segment_id`` live at ``depth`` (its tail) from the indexed fold
    of its branch: the fold rows of everything up to ``depth`` must be written."""
    params = {"leaf_segment": segment_id, "leaf_depth": depth, "min_depth": 0, "max_depth": depth}
    rows: builtins.list[tuple[Any, ...]] = []
    for kind, sql in _LIVE_ROWS_SQL.items():
        found = await conn.execute_fetchall(sql, params)
        for _, ordinal, memory_id, entry_seq in sorted(found, key=lambda r: (r[0], r[1])):
            rows.append((segment_id, kind, memory_id, entry_seq, ordinal))
    latest: dict[tuple[int, str], tuple[Any, ...]] = {}
    for _, entry_seq, record_type, covers in await conn.execute_fetchall(_MARKER_ROWS_SQL, params):
        latest[(LAST_MARKER, record_type)] = (segment_id, LAST_MARKER, record_type, entry_seq, 0)
        if covers is not None:
            key = (LAST_COVERAGE, record_type)
            latest[key] = (segment_id, LAST_COVERAGE, record_type, entry_seq, 0)
    rows.extend(latest.values())
    if rows:
        await conn.executemany(_ADD_SQL, rows)


async def follow_appends(
    conn: SqlConnection, placed: Sequence[PlacedEntry], rows: FoldRows
) -> None:
    """Keep the pools of the segments this batch's memory records landed on (in the
    append transaction, after the fold rows are written)."""
    if not rows.markers:
        return  # every memory record has a marker row: messages only, nothing to follow
    tails: dict[int, int] = {}
    for item in placed:
        tails[item.segment_id] = max(item.depth, tails.get(item.segment_id, item.depth))
    touched = {row[4] for row in rows.markers}
    pooled: set[int] = set()
    for segment_id in sorted(touched):
        if await conn.execute_fetchall(_POOLED_SQL, (segment_id,)):
            pooled.add(segment_id)
        else:
            await start_pool(conn, segment_id, tails[segment_id])
    if not pooled:
        return
    # Each memory record's changes, in branch order: (depth, statement, values).
    changes: builtins.list[tuple[int, int, str, builtins.list[tuple[Any, ...]]]] = []

    def add(segment_id: int, depth: int, sql: str, values: tuple[Any, ...]) -> None:
        if segment_id in pooled:
            changes.append((depth, len(changes), sql, [(segment_id, *values)]))

    for seq, n, memory_id, _, segment_id, depth, *_ in rows.observations:
        add(segment_id, depth, _ADD_SQL, (OBSERVATION, memory_id, seq, n))
    for seq, n, memory_id, _, segment_id, depth, *_ in rows.reflections:
        add(segment_id, depth, _ADD_SQL, (REFLECTION, memory_id, seq, n))
    for _, _, memory_id, segment_id, depth in rows.drops:
        add(segment_id, depth, _REMOVE_SQL, (OBSERVATION, memory_id))
    for _, _, memory_id, _, segment_id, depth in rows.supersessions:
        add(segment_id, depth, _REMOVE_SQL, (REFLECTION, memory_id))
    for seq, _, record_type, covers, segment_id, depth in rows.markers:
        add(segment_id, depth, _REPLACE_SQL, (LAST_MARKER, record_type, seq, 0))
        if covers is not None:
            add(segment_id, depth, _REPLACE_SQL, (LAST_COVERAGE, record_type, seq, 0))
    changes.sort(key=lambda change: (change[0], change[1]))
    # Consecutive changes of one statement go to the database together.
    batch_sql, batch = "", builtins.list[tuple[Any, ...]]()
    for _, _, sql, values in changes:
        if sql != batch_sql and batch:
            await conn.executemany(batch_sql, batch)
            batch = []
        batch_sql = sql
        batch.extend(values)
    if batch:
        await conn.executemany(batch_sql, batch)


async def backfill_live_pool(conn: SqlConnection) -> None:
    """Version 3 to 4: a pool for every segment that holds a memory record, live at the
    segment's tail: exactly the pools appends would have made. Any rows already there (a
    store taken back to an older version by hand) are rebuilt."""
    await conn.execute_fetchall("DELETE FROM om_live")
    tails = await conn.execute_fetchall(
        "SELECT s.segment_id, (SELECT max(e.depth) FROM entries e"
        " WHERE e.segment_id = s.segment_id) FROM segments s"
        " WHERE EXISTS (SELECT 1 FROM om_markers m WHERE m.segment_id = s.segment_id)"
        " ORDER BY s.segment_id"
    )
    for segment_id, depth in tails:
        if depth is not None:
            await start_pool(conn, int(segment_id), int(depth))
