"""The search index of the SQL adapters: ``search_blocks`` rows written, candidates read.

A posting is one distinct term key (``core.search_text.index_keys``) of one indexed item:
an eligible message (kind 0), an observation (kind 1) or a reflection (kind 2) of a memory
record, at the ``(segment_id, depth)`` of the entry that holds it (``ordinal`` is the
item's place in its record, as in the fold tables). Postings are kept packed, one row per
``(term, segment_id, kind, block)`` where ``block`` is ``depth >> BLOCK_SHIFT`` (256
depths): ``postings`` holds each one's depth within the block as one byte, followed for a
memory item by its ordinal as a varint. A row per posting cost 20-25 bytes of the file
(the key repeated, a record header, a cell); packed, a posting costs one to a few
(schema version 8: the index +36% of a store's bytes where it was +81-92%). A write
appends to a row's bytes (an upsert that concatenates), and entries are append-only with
a segment growing at its tail only, so a row's postings stay in depth order.

Read as an index range search per branch piece and query key, blocks newest first, so a
search costs the matches on the branch, not the session; the blocks are decoded here and
the entries (or memory ids) they name read by ``(segment_id, depth)``. SQLite and
PostgreSQL run the same statements (transpiled).

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
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...core.search_text import index_keys, message_search_text
from ...core.sources import ELIGIBLE_SOURCE_ROLES
from ...entries import SessionEntry
from .._rows import entry_columns, stored_entry
from .statements import BRANCH_PATH_CTE

if TYPE_CHECKING:
    from .memory_folds import FoldRows

__all__ = [
    "BLOCK_SHIFT",
    "PENDING_SEGMENTS_SQL",
    "backfill_search_index",
    "backfill_search_marks",
    "block_rows",
    "index_pending_messages",
    "memory_candidate_ids",
    "memory_search_rows",
    "message_candidate_rows",
    "message_search_rows",
    "pack_search_terms",
    "postings_of_block",
    "write_search_rows",
]

KIND_MESSAGE, KIND_OBSERVATION, KIND_REFLECTION = 0, 1, 2
# 256 depths a block: a posting's depth within its block is one byte.
BLOCK_SHIFT = 8
_BLOCK_MASK = (1 << BLOCK_SHIFT) - 1

Posting = tuple[int, int, int, int, int]
"""``(term, segment_id, depth, kind, ordinal)``: one term key of one indexed item."""
Fetch = Callable[[str, Mapping[str, Any]], Awaitable[builtins.list[Any]]]

# A posting joins its row's bytes, or starts the row (one statement for both, so a write
# needs no read first; both engines spell the upsert alike). SQLite's ``||`` gives text
# even of two blobs (their bytes kept, NULs and all): the cast makes it a blob again.
INSERT_BLOCK_SQL = (
    "INSERT INTO search_blocks (term, segment_id, kind, block, postings) VALUES (?, ?, ?, ?, ?)"
    " ON CONFLICT (term, segment_id, kind, block)"
    " DO UPDATE SET postings = CAST(search_blocks.postings || excluded.postings AS BLOB)"
)
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
# Hits are looked up in chunks of at most this many (padded to a power of two, so a few
# statement texts serve every search): SQLite binds at most 32,766 parameters.
_HITS_PER_STATEMENT = 1024


def message_search_rows(placed: Iterable[tuple[SessionEntry, int, int]]) -> list[Posting]:
    """Postings of the eligible messages among ``(entry, segment_id, depth)``."""
    rows: list[Posting] = []
    for entry, segment_id, depth in placed:
        message = entry.message
        if message is None or message.role not in ELIGIBLE_SOURCE_ROLES:
            continue
        rows.extend(
            (k, segment_id, depth, KIND_MESSAGE, 0) for k in _keys(message_search_text(message))
        )
    return rows


def memory_search_rows(fold: FoldRows) -> list[Posting]:
    """Postings of the observations and reflections of a batch's fold rows."""
    rows: list[Posting] = []
    for kind, table in ((KIND_OBSERVATION, fold.observations), (KIND_REFLECTION, fold.reflections)):
        for _seq, ordinal, _mid, _eid, segment_id, depth, _at, body in table:
            text = json.loads(body)["text"]
            rows.extend((k, segment_id, depth, kind, ordinal) for k in _keys(text))
    return rows


@functools.lru_cache(maxsize=4096)
def _keys(text: str) -> tuple[int, ...]:
    # A batch often repeats a text (a folded compaction carries the memory it keeps).
    return index_keys(text)


def _varint(value: int, out: bytearray) -> None:
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def block_rows(postings: Iterable[Posting]) -> list[tuple[int, int, int, int, bytes]]:
    """``search_blocks`` rows ``(term, segment_id, kind, block, postings)`` of the postings,
    each row's postings in the order given (``postings_of_block`` reads them).

    Every writer gives postings in depth order within a segment (messages by depth, a
    record's items by ordinal, the old table by its key), which a row's bytes must keep;
    they are grouped in one pass, without sorting them (the first search of a long
    session packs millions)."""
    rows: dict[tuple[int, int, int, int], bytearray] = {}
    get = rows.get
    for term, segment_id, depth, kind, ordinal in postings:
        key = (term, segment_id, kind, depth >> BLOCK_SHIFT)
        packed = get(key)
        if packed is None:
            packed = rows[key] = bytearray()
        packed.append(depth & _BLOCK_MASK)
        if kind != KIND_MESSAGE:
            _varint(ordinal, packed)
    return [(*key, bytes(packed)) for key, packed in rows.items()]


def postings_of_block(kind: int, block: int, postings: bytes) -> list[tuple[int, int]]:
    """``(depth, ordinal)`` of each posting a row holds, as ``block_rows`` packed them.

    ``CorruptStoreError``-free by construction: a byte string cut short (a damaged file)
    loses its last posting, never raises: the entries a search reads are checked anyway."""
    base = block << BLOCK_SHIFT
    if kind == KIND_MESSAGE:
        return [(base + offset, 0) for offset in postings]
    found: list[tuple[int, int]] = []
    i, end = 0, len(postings)
    while i < end:
        depth = base + postings[i]
        i += 1
        ordinal = shift = 0
        while i < end:
            byte = postings[i]
            i += 1
            ordinal |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                break
        found.append((depth, ordinal))
    return found


_IN_PIECE = (
    "t.segment_id = bp.segment_id"
    f" AND t.block BETWEEN (max(bp.lo, :min_depth) >> {BLOCK_SHIFT})"
    f" AND (min(bp.hi, :max_depth) >> {BLOCK_SHIFT})"
)
_BLOCK_COLUMNS = (
    "t.term, t.segment_id, t.kind, t.block, t.postings,"
    " max(bp.lo, :min_depth), min(bp.hi, :max_depth)"
)


@functools.lru_cache(maxsize=64)
def _message_blocks_sql(count: int) -> str:
    """The newest ``:blocks`` message blocks of each of ``count`` keys (``:k0``...) on the
    branch, each with its piece's depth bounds. Bind a ``LeafPosition``'s params too."""
    per_key = "\n  UNION ALL\n".join(
        f"  SELECT * FROM (SELECT {_BLOCK_COLUMNS}"
        " FROM branch_path bp CROSS JOIN search_blocks t"
        f" WHERE {_IN_PIECE} AND t.term = :k{i} AND t.kind = {KIND_MESSAGE}"
        f" ORDER BY t.block DESC LIMIT :blocks) AS n{i}"
        for i in range(count)
    )
    return f"{BRANCH_PATH_CTE}\n{per_key}"


@functools.lru_cache(maxsize=64)
def _memory_blocks_sql(count: int) -> str:
    """Every observation and reflection block of ``count`` keys on the branch."""
    marks = ", ".join(f":k{i}" for i in range(count))
    return (
        f"{BRANCH_PATH_CTE}\n"
        f"SELECT {_BLOCK_COLUMNS} FROM branch_path bp CROSS JOIN search_blocks t\n"
        f"WHERE {_IN_PIECE} AND t.term IN ({marks}) AND t.kind > {KIND_MESSAGE}"
    )


@functools.lru_cache(maxsize=16)
def _entries_at_sql(count: int) -> str:
    """The entry rows (``stores/_rows.py``, no data) at ``count`` ``(:s<i>, :d<i>)``, each
    followed by its segment and depth."""
    values = ", ".join(f"(:s{i}, :d{i})" for i in range(count))
    return (
        f"WITH hits(segment_id, depth) AS (VALUES {values})\n"
        f"SELECT {entry_columns('e', data=False)}, e.segment_id, e.depth"
        " FROM hits h CROSS JOIN entries e\n"
        "WHERE e.segment_id = h.segment_id AND e.depth = h.depth"
    )


@functools.lru_cache(maxsize=16)
def _memory_at_sql(count: int) -> str:
    """Memory ids of the items at ``count`` ``(:k<i>, :s<i>, :d<i>, :o<i>)``."""
    values = ", ".join(f"(:k{i}, :s{i}, :d{i}, :o{i})" for i in range(count))
    on = "{t}.segment_id = h.segment_id AND {t}.depth = h.depth AND {t}.ordinal = h.ordinal"
    return (
        f"WITH hits(kind, segment_id, depth, ordinal) AS (VALUES {values})\n"
        "SELECT o.memory_id FROM hits h CROSS JOIN om_observations o\n"
        f"WHERE h.kind = {KIND_OBSERVATION} AND {on.format(t='o')}\n"
        "UNION ALL\n"
        "SELECT r.memory_id FROM hits h CROSS JOIN om_reflections r\n"
        f"WHERE h.kind = {KIND_REFLECTION} AND {on.format(t='r')}"
    )


def _chunks(hits: Sequence[tuple[int, ...]]) -> Iterable[tuple[int, Sequence[tuple[int, ...]]]]:
    """``hits`` in chunks, each with the padded count of its statement (a power of two)."""
    for start in range(0, len(hits), _HITS_PER_STATEMENT):
        chunk = hits[start : start + _HITS_PER_STATEMENT]
        yield max(8, 1 << (len(chunk) - 1).bit_length()), chunk


def key_params(keys: Iterable[int]) -> dict[str, int]:
    """``{"k0": ..., "k1": ...}`` for the block statements (sorted: one text per count)."""
    return {f"k{i}": k for i, k in enumerate(sorted(keys))}


async def message_candidate_rows(
    fetch: Fetch, position: Mapping[str, Any], keys: frozenset[int], cap: int
) -> tuple[builtins.list[Any], builtins.list[frozenset[int]]]:
    """The entry rows of the branch's indexed messages among the newest ``cap`` holding
    each key (what ``search.scan_message_candidates`` finds by a scan), with the keys each
    was found by, row for row.

    Each block holds at least one posting, so the newest ``cap`` blocks of a key hold its
    newest ``cap`` postings, but for blocks at a piece's ends, which may hold none inside
    the piece: a margin of blocks is read, and a key whose blocks ran out at the margin
    before ``cap`` postings is read again without it (a branch of many forks)."""
    if not keys:
        return [], []
    ordered = sorted(keys)
    margin = cap + 16
    params = {**position, **key_params(ordered), "blocks": margin}
    rows = await fetch(_message_blocks_sql(len(ordered)), params)
    by_key: dict[int, builtins.list[Any]] = {key: [] for key in ordered}
    for row in rows:
        by_key[row[0]].append(row)
    for key in [k for k in ordered if len(by_key[k]) >= margin]:
        again = {**position, "k0": key, "blocks": 2**62}
        by_key[key] = await fetch(_message_blocks_sql(1), again)
    hits: dict[tuple[int, int], builtins.list[int]] = {}
    for key in ordered:
        found: builtins.list[tuple[int, int]] = []
        for _term, segment_id, kind, block, postings, lo, hi in by_key[key]:
            found.extend(
                (depth, segment_id)
                for depth, _ in postings_of_block(kind, block, bytes(postings))
                if lo <= depth <= hi
            )
        found.sort(reverse=True)
        for hit in found[:cap]:
            hits.setdefault(hit, []).append(key)
    out: builtins.list[Any] = []
    found_by: builtins.list[frozenset[int]] = []
    for count, chunk in _chunks(sorted(hits, reverse=True)):
        bound: dict[str, int] = {}
        for i in range(count):
            depth, segment_id = chunk[i] if i < len(chunk) else (-1, -1)
            bound[f"s{i}"], bound[f"d{i}"] = segment_id, depth
        rows = await fetch(_entries_at_sql(count), bound)
        # The rows come back in any order: each is put back with its hit by its place.
        placed = {(row[-1], row[-2]): row[:-2] for row in rows}
        for depth, segment_id in chunk:
            row = placed.get((depth, segment_id))
            if row is not None:
                out.append(row)
                found_by.append(frozenset(hits[(depth, segment_id)]))
    return out, found_by


async def memory_candidate_ids(
    fetch: Fetch, position: Mapping[str, Any], keys: frozenset[int]
) -> builtins.set[str]:
    """Memory ids of the branch's indexed observations and reflections holding any key."""
    if not keys:
        return set()
    params = {**position, **key_params(keys)}
    items: set[tuple[int, int, int, int]] = set()
    for _term, segment_id, kind, block, postings, lo, hi in await fetch(
        _memory_blocks_sql(len(keys)), params
    ):
        items.update(
            (kind, segment_id, depth, ordinal)
            for depth, ordinal in postings_of_block(kind, block, bytes(postings))
            if lo <= depth <= hi
        )
    found: set[str] = set()
    for count, chunk in _chunks(sorted(items)):
        bound: dict[str, int] = {}
        for i in range(count):
            kind, segment_id, depth, ordinal = chunk[i] if i < len(chunk) else (-1, -1, -1, -1)
            bound[f"k{i}"], bound[f"s{i}"], bound[f"d{i}"], bound[f"o{i}"] = (
                kind,
                segment_id,
                depth,
                ordinal,
            )
        found.update(row[0] for row in await fetch(_memory_at_sql(count), bound))
    return found


async def write_search_rows(conn: Any, postings: Sequence[Posting]) -> None:
    """Add the postings on the writer connection, inside the append transaction."""
    if postings:
        await conn.executemany(INSERT_BLOCK_SQL, block_rows(postings))


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
        rows: builtins.list[Posting] = []
        for depth, *row in await conn.execute_fetchall(
            _MESSAGES_AFTER_SQL, (segment_id, after, *_ROLES)
        ):
            entry, _ = stored_entry(row)
            rows.extend(message_search_rows([(entry, segment_id, depth)]))
            indexed += 1
        await write_search_rows(conn, rows)
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
    """Fill the index from the stored entries and fold rows (the migration to the schema
    version that added it, 5). ``conn`` as for ``memory_folds.backfill_supersessions``.

    The index is rebuilt whole: rows an earlier run left (a step run again on a store
    whose version stamp lags its tables) are deleted first, not duplicated."""
    await conn.execute("DELETE FROM search_blocks")
    roles = sorted(ELIGIBLE_SOURCE_ROLES)
    marks = ", ".join("?" * len(roles))
    sql = (
        f"SELECT segment_id, depth, {entry_columns(data=False)} FROM entries "
        f"WHERE kind = 'message' AND role IN ({marks}) ORDER BY seq"
    )
    rows: builtins.list[Posting] = []
    for segment_id, depth, *row in await conn.execute_fetchall(sql, roles):
        entry, _ = stored_entry(row)
        rows.extend(message_search_rows([(entry, segment_id, depth)]))
    for kind, table in ((KIND_OBSERVATION, "om_observations"), (KIND_REFLECTION, "om_reflections")):
        sql = f"SELECT segment_id, depth, ordinal, body FROM {table} ORDER BY entry_seq, ordinal"
        for segment_id, depth, ordinal, body in await conn.execute_fetchall(sql):
            text = json.loads(body)["text"]
            rows.extend((k, segment_id, depth, kind, ordinal) for k in _keys(text))
    await write_search_rows(conn, rows)


async def pack_search_terms(conn: Any) -> None:
    """Version 7 to 8: the rows of ``search_terms`` (one per posting) packed into
    ``search_blocks``, then the old table dropped. What was indexed stays indexed, no more
    (the marks of ``search_indexed`` still say how far); nothing is tokenised again. The
    caller runs it only while the old table exists (each engine asks its catalogue)."""
    await conn.execute("DELETE FROM search_blocks")
    rows = await conn.execute_fetchall(
        "SELECT term, segment_id, depth, kind, ordinal FROM search_terms"
        " ORDER BY term, segment_id, depth, kind, ordinal"  # its key: no sort on SQLite
    )
    await write_search_rows(conn, [tuple(row) for row in rows])
    await conn.execute("DROP TABLE search_terms")
