"""The search index of the SQL adapters: ``search_terms`` rows written, candidates read.

One row per distinct term key of each indexed item (``core.search_text.index_keys``): an
eligible message (kind 0), an observation (kind 1) or a reflection (kind 2) of a memory
record, at the ``(segment_id, depth)`` of the entry that holds it (``ordinal`` is the
item's place in its record, as in the fold tables). The rows are written in the append
transaction with the entry, erased with its session, and read as an index range search
per branch piece and query key, so a search costs the matches on the branch, not the
session. SQLite and PostgreSQL run the same statements (transpiled).
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
    "backfill_search_index",
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
        f"SELECT {entry_columns('e')} FROM hits h CROSS JOIN entries e\n"
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


async def backfill_search_index(conn: Any) -> None:
    """Fill ``search_terms`` from the stored entries and fold rows (the migration to the
    schema version that added it). ``conn`` as for ``memory_folds.backfill_supersessions``.

    The index is rebuilt whole: rows an earlier run left (a step run again on a store
    whose version stamp lags its tables) are deleted first, not duplicated."""
    await conn.execute("DELETE FROM search_terms")
    roles = sorted(ELIGIBLE_SOURCE_ROLES)
    marks = ", ".join("?" * len(roles))
    sql = (
        f"SELECT segment_id, depth, {entry_columns()} FROM entries "
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
