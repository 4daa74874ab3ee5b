"""The search index of the SQL adapters: ``search_terms`` rows written, candidates read.

One row per distinct term key of each indexed item (``core.search_text.index_keys``): an
eligible message (kind 0), an observation (kind 1) or a reflection (kind 2) of a memory
record, at the ``(segment_id, depth)`` of the entry that holds it (``ordinal`` is the
item's place in its record, as in the fold tables). Read as an index range search per
branch piece and query key, so a search costs the matches on the branch, not the session.
SQLite and PostgreSQL run the same statements (transpiled).

When rows are written: a memory item's in the append transaction of its record (a few
items a turn). A message's are not written by the append, which is the hot path of every
turn (they were 60-70% of an ``append_many`` of realistic messages): the first search
whose branch reaches a message the index does not hold yet indexes the rest of each such
segment in one write transaction (``index_pending_messages``), and ``search_indexed``
records how far each segment is indexed. Entries are append-only and a segment grows at
its tail only, so "indexed up to depth d" stays true until the session is deleted, and
the deletion erases the mark with the rows. A store that cannot write (read-only) finds
the messages past the mark by a scan of the branch instead.
"""

from __future__ import annotations

import builtins
import functools
import json
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ...core.search_text import index_keys, message_search_text
from ...core.sources import ELIGIBLE_SOURCE_ROLES
from ...entries import SessionEntry
from .._rows import entry_columns, stored_entry
from .statements import BRANCH_PATH_CTE

if TYPE_CHECKING:
    from .memory_folds import FoldRows

__all__ = [
    "INSERT_SEARCH_SQL",
    "PENDING_SEGMENTS_SQL",
    "backfill_search_index",
    "backfill_search_marks",
    "index_pending_messages",
    "memory_search_rows",
    "message_search_rows",
    "search_memory_sql",
    "search_messages_sql",
    "write_search_rows",
]

KIND_MESSAGE, KIND_OBSERVATION, KIND_REFLECTION = 0, 1, 2

INSERT_SEARCH_SQL = (
    "INSERT INTO search_terms (term, segment_id, depth, kind, ordinal) VALUES (?, ?, ?, ?, ?)"
)
# The same rows, where an earlier run may have written some (a migration step run again).
_INSERT_NEW_SEARCH_SQL = INSERT_SEARCH_SQL.replace("INSERT INTO", "INSERT OR IGNORE INTO")
# The branch's pieces whose messages the index does not all hold yet. Bind a
# ``LeafPosition``'s params.
PENDING_SEGMENTS_SQL = (
    f"{BRANCH_PATH_CTE}\n"
    "SELECT bp.segment_id FROM branch_path bp\n"
    "LEFT JOIN search_indexed si ON si.segment_id = bp.segment_id\n"
    "WHERE si.depth IS NULL OR si.depth < bp.hi"
)
_ROLES = tuple(sorted(ELIGIBLE_SOURCE_ROLES))
_MESSAGES_AFTER_SQL = (
    f"SELECT depth, {entry_columns(data=False)} FROM entries WHERE segment_id = ? AND depth > ?"
    f" AND kind = 'message' AND role IN ({', '.join('?' * len(_ROLES))}) ORDER BY depth"
)


def message_search_rows(placed: Iterable[tuple[SessionEntry, int, int]]) -> list[tuple[int, ...]]:
    """Rows of the eligible messages among ``(entry, segment_id, depth)``."""
    rows: list[tuple[int, ...]] = []
    for entry, segment_id, depth in placed:
        message = entry.message
        if message is None or message.role not in ELIGIBLE_SOURCE_ROLES:
            continue
        rows.extend(
            (k, segment_id, depth, KIND_MESSAGE, 0) for k in _keys(message_search_text(message))
        )
    return rows


def memory_search_rows(fold: FoldRows) -> list[tuple[int, ...]]:
    """Rows of the observations and reflections of a batch's fold rows."""
    rows: list[tuple[int, ...]] = []
    for kind, table in ((KIND_OBSERVATION, fold.observations), (KIND_REFLECTION, fold.reflections)):
        for _seq, ordinal, _mid, _eid, segment_id, depth, _at, body in table:
            text = json.loads(body)["text"]
            rows.extend((k, segment_id, depth, kind, ordinal) for k in _keys(text))
    return rows


@functools.lru_cache(maxsize=4096)
def _keys(text: str) -> tuple[int, ...]:
    # A batch often repeats a text (a folded compaction carries the memory it keeps).
    return index_keys(text)


def _where(count: int) -> str:
    marks = ", ".join(f":k{i}" for i in range(count))
    return (
        "t.segment_id = bp.segment_id"
        " AND t.depth BETWEEN max(bp.lo, :min_depth) AND min(bp.hi, :max_depth)"
        f" AND t.term IN ({marks})"
    )


_PIECE = (
    "t.segment_id = bp.segment_id"
    " AND t.depth BETWEEN max(bp.lo, :min_depth) AND min(bp.hi, :max_depth)"
)


@functools.lru_cache(maxsize=64)
def search_messages_sql(count: int) -> str:
    """The branch's indexed messages among the newest ``:cap`` holding each of ``count``
    keys (``:k0``...), whole entry rows (``stores/_rows.py``). Bind a ``LeafPosition``'s
    params too. Depth is a message's place on the branch, so "newest" is deepest."""
    per_key = "\n  UNION\n".join(
        "  SELECT segment_id, depth FROM (SELECT t.segment_id, t.depth"
        " FROM branch_path bp CROSS JOIN search_terms t"
        f" WHERE {_PIECE} AND t.term = :k{i} AND t.kind = {KIND_MESSAGE}"
        f" ORDER BY t.depth DESC LIMIT :cap) AS n{i}"
        for i in range(count)
    )
    return (
        f"{BRANCH_PATH_CTE},\n"
        f"hits(segment_id, depth) AS (\n{per_key})\n"
        f"SELECT {entry_columns('e', data=False)} FROM hits h CROSS JOIN entries e\n"
        "WHERE e.segment_id = h.segment_id AND e.depth = h.depth"
    )


@functools.lru_cache(maxsize=64)
def search_memory_sql(count: int) -> str:
    """Memory ids of the branch's indexed observations and reflections holding any of
    ``count`` keys. Bind as ``search_messages_sql``."""
    return (
        f"{BRANCH_PATH_CTE},\n"
        "hits(kind, segment_id, depth, ordinal) AS (\n"
        "  SELECT DISTINCT t.kind, t.segment_id, t.depth, t.ordinal\n"
        "  FROM branch_path bp CROSS JOIN search_terms t\n"
        f"  WHERE {_where(count)} AND t.kind > {KIND_MESSAGE})\n"
        "SELECT o.memory_id FROM hits h CROSS JOIN om_observations o\n"
        f"WHERE h.kind = {KIND_OBSERVATION} AND o.segment_id = h.segment_id"
        " AND o.depth = h.depth AND o.ordinal = h.ordinal\n"
        "UNION ALL\n"
        "SELECT r.memory_id FROM hits h CROSS JOIN om_reflections r\n"
        f"WHERE h.kind = {KIND_REFLECTION} AND r.segment_id = h.segment_id"
        " AND r.depth = h.depth AND r.ordinal = h.ordinal"
    )


def key_params(keys: Iterable[int]) -> dict[str, int]:
    """``{"k0": ..., "k1": ...}`` for the statements above (sorted: one text per count)."""
    return {f"k{i}": k for i, k in enumerate(sorted(keys))}


async def write_search_rows(conn: Any, rows: Sequence[tuple[int, ...]]) -> None:
    """Insert index rows on the writer connection, inside the append transaction."""
    if rows:
        await conn.executemany(INSERT_SEARCH_SQL, rows)


async def index_pending_messages(conn: Any, segment_ids: Iterable[int]) -> int:
    """Index the eligible messages of ``segment_ids`` past their ``search_indexed`` mark,
    and move each mark to its segment's last entry; the number of messages indexed.

    Run inside one write transaction that holds the writer's lock (SQLite's ``BEGIN
    IMMEDIATE``, PostgreSQL's session lock): the marks are read again there, so two
    searches that both found a segment pending index it once.
    """
    indexed = 0
    for segment_id in sorted(set(segment_ids)):
        held = await conn.execute_fetchall(
            "SELECT depth FROM search_indexed WHERE segment_id = ?", (segment_id,)
        )
        after = held[0][0] if held else -1
        top = await conn.execute_fetchall(
            "SELECT max(depth) FROM entries WHERE segment_id = ?", (segment_id,)
        )
        last = top[0][0] if top else None
        if last is None or last <= after:
            continue
        rows: builtins.list[tuple[int, ...]] = []
        for depth, *row in await conn.execute_fetchall(
            _MESSAGES_AFTER_SQL, (segment_id, after, *_ROLES)
        ):
            entry, _ = stored_entry(row)
            rows.extend(message_search_rows([(entry, segment_id, depth)]))
            indexed += 1
        if rows:
            await conn.executemany(_INSERT_NEW_SEARCH_SQL, rows)
        if held:
            await conn.execute(
                "UPDATE search_indexed SET depth = ? WHERE segment_id = ?", (last, segment_id)
            )
        else:
            await conn.execute(
                "INSERT INTO search_indexed (segment_id, depth) VALUES (?, ?)", (segment_id, last)
            )
    return indexed


async def backfill_search_marks(conn: Any) -> None:
    """Mark every segment indexed to its last entry (the migration to the version that
    added ``search_indexed``: the version before indexed every message in its append)."""
    await conn.execute("DELETE FROM search_indexed")
    await conn.execute(
        "INSERT INTO search_indexed (segment_id, depth)"
        " SELECT segment_id, max(depth) FROM entries GROUP BY segment_id"
    )


async def backfill_search_index(conn: Any) -> None:
    """Fill ``search_terms`` from the stored entries and fold rows (the migration to the
    schema version that added it). ``conn`` as for ``memory_folds.backfill_supersessions``.

    The index is rebuilt whole: rows an earlier run left (a step run again on a store
    whose version stamp lags its tables) are deleted first, not duplicated."""
    await conn.execute("DELETE FROM search_terms")
    roles = sorted(ELIGIBLE_SOURCE_ROLES)
    marks = ", ".join("?" * len(roles))
    sql = (
        f"SELECT segment_id, depth, {entry_columns(data=False)} FROM entries "
        f"WHERE kind = 'message' AND role IN ({marks}) ORDER BY seq"
    )
    rows: builtins.list[tuple[int, ...]] = []
    for segment_id, depth, *row in await conn.execute_fetchall(sql, roles):
        entry, _ = stored_entry(row)
        rows.extend(message_search_rows([(entry, segment_id, depth)]))
        if len(rows) >= 50_000:
            await write_search_rows(conn, rows)
            rows = []
    for kind, table in ((KIND_OBSERVATION, "om_observations"), (KIND_REFLECTION, "om_reflections")):
        sql = f"SELECT segment_id, depth, ordinal, body FROM {table} ORDER BY entry_seq, ordinal"
        for segment_id, depth, ordinal, body in await conn.execute_fetchall(sql):
            text = json.loads(body)["text"]
            rows.extend((k, segment_id, depth, kind, ordinal) for k in _keys(text))
    await write_search_rows(conn, rows)
