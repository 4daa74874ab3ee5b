"""The search index of the SQL adapters: its rows written, candidates read.

A posting is one distinct term key (``core.search_text.index_keys``) of one indexed item:
an eligible message (kind 0), an observation (kind 1) or a reflection (kind 2) of a memory
record, at the ``(segment_id, depth)`` of the entry that holds it (``ordinal`` is the
item's place in its record, as in the fold tables).

A message's postings, nearly all of them (98% in the bench's sessions), are packed:
``search_blocks`` holds one row per ``(term, segment_id, block)``, ``block`` being
``depth >> BLOCK_SHIFT`` (256 depths), whose ``postings`` bytes hold each message's depth
within the block, one byte each, in depth order. A row per posting cost 20-25 bytes of the
file (the key repeated, a record header, a cell); packed, a posting costs about one
(schema version 8: the index +32-34% of a store's bytes where it was +84-88%). A write
appends to a row's bytes (one upsert that concatenates); entries are append-only and a
segment grows at its tail only, so a row's bytes stay in depth order. A memory item's
postings stay one row each in ``search_terms``, whose one statement joins them to the
memory ids in the engine: they are few, and a search ranks every active item that holds
a query word, so packing them would move that join into Python for a few bytes.

Read as an index range search per branch piece and query key, so a search costs the
matches on the branch, not the session: a key's message blocks newest first, decoded here
until the newest ``SEARCH_CANDIDATES_PER_TERM`` are found, then the entries they name by
``(segment_id, depth)``. SQLite and PostgreSQL run the same statements (transpiled).

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
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
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
    "pack_message_postings",
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

# A message's postings join their row's bytes, or start the row (one statement for both,
# so a write needs no read first; both engines spell the upsert alike). SQLite's ``||``
# gives text even of two blobs (their bytes kept, NULs and all): the cast makes it a blob.
INSERT_BLOCK_SQL = (
    "INSERT INTO search_blocks (term, segment_id, block, postings) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (term, segment_id, block)"
    " DO UPDATE SET postings = CAST(search_blocks.postings || excluded.postings AS BLOB)"
)
# A memory item's postings, a row each.
INSERT_TERM_SQL = (
    "INSERT INTO search_terms (term, segment_id, depth, kind, ordinal) VALUES (?, ?, ?, ?, ?)"
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


def block_rows(postings: Iterable[Posting]) -> list[tuple[int, int, int, bytes]]:
    """``search_blocks`` rows ``(term, segment_id, block, postings)`` of message postings,
    each row's postings in the order given (``postings_of_block`` reads them).

    Every writer gives a segment's messages in depth order, which a row's bytes must keep;
    they are grouped in one pass, without sorting them (the first search of a long
    session packs millions)."""
    rows: dict[tuple[int, int, int], bytearray] = {}
    get = rows.get
    for term, segment_id, depth, _kind, _ordinal in postings:
        key = (term, segment_id, depth >> BLOCK_SHIFT)
        packed = get(key)
        if packed is None:
            packed = rows[key] = bytearray()
        packed.append(depth & _BLOCK_MASK)
    return [(*key, bytes(packed)) for key, packed in rows.items()]


def postings_of_block(block: int, postings: bytes) -> list[int]:
    """The depth of each message posting a row holds, as ``block_rows`` packed them."""
    base = block << BLOCK_SHIFT
    return [base + offset for offset in postings]


_IN_PIECE = (
    "t.segment_id = bp.segment_id"
    f" AND t.block BETWEEN (max(bp.lo, :min_depth) >> {BLOCK_SHIFT})"
    f" AND (min(bp.hi, :max_depth) >> {BLOCK_SHIFT})"
)


@functools.lru_cache(maxsize=64)
def _message_blocks_sql(count: int) -> str:
    """The newest ``:blocks`` message blocks of each of ``count`` keys (``:k0``...) on the
    branch, each with its piece's depth bounds. Bind a ``LeafPosition``'s params too."""
    per_key = "\n  UNION ALL\n".join(
        "  SELECT * FROM (SELECT t.term, t.segment_id, t.block, t.postings,"
        " max(bp.lo, :min_depth), min(bp.hi, :max_depth)"
        " FROM branch_path bp CROSS JOIN search_blocks t"
        f" WHERE {_IN_PIECE} AND t.term = :k{i}"
        f" ORDER BY t.block DESC LIMIT :blocks) AS n{i}"
        for i in range(count)
    )
    return f"{BRANCH_PATH_CTE}\n{per_key}"


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


@functools.lru_cache(maxsize=64)
def _search_memory_sql(count: int) -> str:
    """Memory ids of the branch's indexed observations and reflections holding any of
    ``count`` keys (``:k0``...). Bind a ``LeafPosition``'s params too."""
    marks = ", ".join(f":k{i}" for i in range(count))
    return (
        f"{BRANCH_PATH_CTE},\n"
        "hits(kind, segment_id, depth, ordinal) AS (\n"
        "  SELECT DISTINCT t.kind, t.segment_id, t.depth, t.ordinal\n"
        "  FROM branch_path bp CROSS JOIN search_terms t\n"
        "  WHERE t.segment_id = bp.segment_id"
        " AND t.depth BETWEEN max(bp.lo, :min_depth) AND min(bp.hi, :max_depth)"
        f" AND t.term IN ({marks}))\n"
        "SELECT o.memory_id FROM hits h CROSS JOIN om_observations o\n"
        f"WHERE h.kind = {KIND_OBSERVATION} AND o.segment_id = h.segment_id"
        " AND o.depth = h.depth AND o.ordinal = h.ordinal\n"
        "UNION ALL\n"
        "SELECT r.memory_id FROM hits h CROSS JOIN om_reflections r\n"
        f"WHERE h.kind = {KIND_REFLECTION} AND r.segment_id = h.segment_id"
        " AND r.depth = h.depth AND r.ordinal = h.ordinal"
    )


def key_params(keys: Iterable[int]) -> dict[str, int]:
    """``{"k0": ..., "k1": ...}`` for the key statements (sorted: one text per count)."""
    return {f"k{i}": k for i, k in enumerate(sorted(keys))}


Visible = Callable[[builtins.list[Any]], builtins.list[frozenset[int]]]
"""The keys of each entry row's text as a read shows it (redacted), row for row."""


async def message_candidate_rows(
    fetch: Fetch,
    position: Mapping[str, Any],
    keys: frozenset[int],
    cap: int,
    visible: Visible | None = None,
) -> builtins.list[Any]:
    """The entry rows of the branch's indexed messages among the newest ``cap`` holding
    each key (what ``search.scan_message_candidates`` finds by a scan), newest first.
    With ``visible`` (a read with secrets), a message counts for a key only while the key
    shows in its redacted text: a hidden copy of a word takes no place among its newest
    ``cap``, and a message found only by hidden words is none, so the answer never depends
    on hidden text.

    A key's newest ``cap + 16`` blocks are read (each holds at least one posting; those
    at a piece's ends may hold none inside it). When the limit cut the blocks, the lowest
    block number read may be cut too, so only the numbers above it are trusted: if they
    hold enough the answer is exact, else (a key of many forks, of blocks mostly outside
    their pieces, or of many hidden copies) the key's blocks are read again, all of them."""
    if not keys:
        return []
    ordered = sorted(keys)
    margin = cap + 16
    params = {**position, **key_params(ordered), "blocks": margin}
    rows = await fetch(_message_blocks_sql(len(ordered)), params)
    by_key: dict[int, builtins.list[Any]] = {key: [] for key in ordered}
    for row in rows:
        by_key[row[0]].append(row)
    read: dict[tuple[int, int], Any] = {}  # (depth, segment_id) -> its entry row, or None
    shown: dict[tuple[int, int], frozenset[int]] = {}

    async def load(wanted: Sequence[tuple[int, int]]) -> None:
        todo = [hit for hit in dict.fromkeys(wanted) if hit not in read]
        for count, chunk in _chunks(todo):
            bound: dict[str, int] = {}
            for i in range(count):
                depth, segment_id = chunk[i] if i < len(chunk) else (-1, -1)
                bound[f"s{i}"], bound[f"d{i}"] = segment_id, depth
            got = await fetch(_entries_at_sql(count), bound)
            # The rows come back in any order: each is put back with its hit by its place.
            placed = {(row[-1], row[-2]): row[:-2] for row in got}
            for hit in chunk:
                read[hit] = placed.get(hit)
        if visible is not None:
            found = [hit for hit in todo if read[hit] is not None]
            shown.update(zip(found, visible([read[hit] for hit in found]), strict=True))

    async def newest(key: int, blocks: Sequence[Any]) -> builtins.list[tuple[int, int]]:
        postings = _newest_first(blocks)
        if visible is None:
            return [hit for _, hit in zip(range(cap), postings, strict=False)]
        taken: builtins.list[tuple[int, int]] = []
        while len(taken) < cap:
            batch = [hit for _, hit in zip(range(cap), postings, strict=False)]
            if not batch:
                break
            await load(batch)
            taken += [hit for hit in batch if read[hit] is not None and key in shown[hit]]
        return taken[:cap]

    hits: set[tuple[int, int]] = set()
    for key in ordered:
        blocks = by_key[key]
        if len(blocks) < margin:
            chosen = await newest(key, blocks)  # every block of the key on the branch
        else:
            lowest = min(_block_number(row) for row in blocks)
            chosen = await newest(key, [row for row in blocks if _block_number(row) > lowest])
            if len(chosen) < cap:
                every = {**position, "k0": key, "blocks": 2**62}
                chosen = await newest(key, await fetch(_message_blocks_sql(1), every))
        hits.update(chosen)
    ordered_hits = sorted(hits, reverse=True)
    await load(ordered_hits)
    return [read[hit] for hit in ordered_hits if read[hit] is not None]


def _newest_first(rows: Sequence[Any]) -> Iterator[tuple[int, int]]:
    """The ``(depth, segment_id)`` in range of one key's message blocks, newest first.

    Blocks are decoded lazily, newest block number first: a caller that stops after the
    newest few decodes one or two blocks of the hundreds read. Every posting of a lower
    block number is older (a number is a depth range; two pieces may share one, at a
    fork, so a number's blocks are decoded and ordered together)."""
    ordered = sorted(rows, key=_block_number, reverse=True)
    at = 0
    while at < len(ordered):
        block = ordered[at][2]
        group: builtins.list[tuple[int, int]] = []
        while at < len(ordered) and ordered[at][2] == block:
            _term, segment_id, _block, postings, lo, hi = ordered[at]
            group.extend(
                (depth, segment_id)
                for depth in postings_of_block(block, bytes(postings))
                if lo <= depth <= hi
            )
            at += 1
        group.sort(reverse=True)
        yield from group


def _block_number(row: Sequence[Any]) -> int:
    return int(row[2])


def _chunks(hits: Sequence[tuple[int, int]]) -> Iterable[tuple[int, Sequence[tuple[int, int]]]]:
    """``hits`` in chunks, each with the padded count of its statement (a power of two)."""
    for start in range(0, len(hits), _HITS_PER_STATEMENT):
        chunk = hits[start : start + _HITS_PER_STATEMENT]
        yield max(8, 1 << (len(chunk) - 1).bit_length()), chunk


async def memory_candidate_ids(
    fetch: Fetch, position: Mapping[str, Any], keys: frozenset[int]
) -> builtins.set[str]:
    """Memory ids of the branch's indexed observations and reflections holding any key:
    one statement (``search_terms`` joined to the fold tables)."""
    if not keys:
        return set()
    params = {**position, **key_params(keys)}
    return {row[0] for row in await fetch(_search_memory_sql(len(keys)), params)}


async def write_search_rows(conn: Any, postings: Sequence[Posting]) -> None:
    """Add the postings on the writer connection, inside the append transaction: a
    message's packed into ``search_blocks``, a memory item's a row each."""
    messages = [p for p in postings if p[3] == KIND_MESSAGE]
    if messages:
        await conn.executemany(INSERT_BLOCK_SQL, block_rows(messages))
    if len(messages) < len(postings):
        await conn.executemany(INSERT_TERM_SQL, [p for p in postings if p[3] != KIND_MESSAGE])


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
    await conn.execute("DELETE FROM search_terms")
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
        if len(rows) >= 50_000:
            # Written as they come (in append order, so each row's bytes stay in depth
            # order across the writes), not held for the whole store.
            await write_search_rows(conn, rows)
            rows = []
    for kind, table in ((KIND_OBSERVATION, "om_observations"), (KIND_REFLECTION, "om_reflections")):
        sql = f"SELECT segment_id, depth, ordinal, body FROM {table} ORDER BY entry_seq, ordinal"
        for segment_id, depth, ordinal, body in await conn.execute_fetchall(sql):
            text = json.loads(body)["text"]
            rows.extend((k, segment_id, depth, kind, ordinal) for k in _keys(text))
    await write_search_rows(conn, rows)


async def pack_message_postings(conn: Any) -> None:
    """Version 7 to 8: the message rows of ``search_terms`` (one per posting) packed into
    ``search_blocks`` and deleted; a memory item's rows stay. What was indexed stays
    indexed, no more (``search_indexed`` still says how far): nothing is tokenised again.
    Run again (a file whose stamp lags its tables), it finds no message row to move.

    Read one range of term keys at a time (a long session holds millions of rows, and
    each term's rows are whole within its range, in key order): memory stays bounded."""
    sql = (
        "SELECT term, segment_id, depth, kind, ordinal FROM search_terms"
        f" WHERE kind = {KIND_MESSAGE} AND term >= ? AND term < ?"
        " ORDER BY term, segment_id, depth, kind, ordinal"  # its key: no sort on SQLite
    )
    for low in range(0, _TERM_KEYS, _TERM_KEYS_PER_READ):
        rows = await conn.execute_fetchall(sql, (low, low + _TERM_KEYS_PER_READ))
        await write_search_rows(conn, [tuple(row) for row in rows])
    await conn.execute(f"DELETE FROM search_terms WHERE kind = {KIND_MESSAGE}")


# Term keys are 31-bit (``core.search_text.term_key``); the migration reads them in 64
# ranges (about 30,000 rows each for a session of 100,000 entries).
_TERM_KEYS = 1 << 31
_TERM_KEYS_PER_READ = _TERM_KEYS // 64
