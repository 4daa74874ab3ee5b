"""Placing a batch in the tree: rule checks, segments and depths, inside the append."""

from __future__ import annotations

import builtins
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..._gc import collector_paused
from ...core.parse import MemoryRecord, parse_memory_record
from ...core.sources import ELIGIBLE_SOURCE_ROLES
from ...core.validation import (
    MemoryRecordNeeds,
    branch_facts_from_entries,
    record_needs,
    validate_memory_record,
)
from ...entries import SessionEntry, id_problem
from ...errors import (
    CorruptStoreError,
    DuplicateEntryError,
    EntryNotFoundError,
    InvalidInputError,
    MemoryRecordError,
    RootExistsError,
    SessionMismatchError,
    StoreRuleError,
    UnknownParentError,
)
from ...tokens import MESSAGE_OVERHEAD_TOKENS, TokenEstimator
from .._rows import message_data_json, message_serializer, payload_json
from .connection import Params, SqlReader
from .statements import (
    BRANCH_PIECES_SQL,
    ENTRIES_BY_ID_SQL,
    ENTRIES_BY_SEQ_SQL,
    LOOKUP_CHUNK,
    MEMORY_BY_ID_SQL,
    MEMORY_HEAD_SQL,
    PARENTS_SQL,
    POSITION_SQL,
    STATE_AND_PARENTS_SQL,
    STATE_SQL,
    LeafPosition,
    fetch_first_row,
    fetch_rows,
)

# Turns a stored entry row (sql.ENTRY_COLUMNS) back into its entry, raising CorruptStoreError.
ParseBody = Callable[[Sequence[Any]], SessionEntry]


@dataclass(frozen=True, slots=True)
class PlacedEntry:
    """An entry as appended: its row number, segment, depth and token count."""

    entry: SessionEntry
    seq: int
    segment_id: int
    depth: int
    tokens: int


class _StoredParent(NamedTuple):
    """A parent outside the batch, as stored: what placing its children needs."""

    session_id: str
    depth: int
    segment_id: int
    has_child: bool
    path_tokens: int | None
    token_encoding: str


class Placer:
    """Gives each entry of a checked batch its row: seq, depth, segment, path tokens.

    Parents inside the batch are found in batch-local dicts of plain values (no object
    per entry, which keeps a 100,000-entry batch cheap); the ones outside it were looked
    up once, before placing.
    """

    def __init__(
        self,
        session_id: str,
        parents: Mapping[str, _StoredParent],
        last_seq: int,
        last_segment: int,
        encoding: str,
    ) -> None:
        self.session_id = session_id
        self.seq = last_seq
        self.segment = last_segment
        self.encoding = encoding
        self.segments: builtins.list[tuple[int, str, int | None, int]] = []
        self.depth = {pid: p.depth for pid, p in parents.items()}
        self.segment_of = {pid: p.segment_id for pid, p in parents.items()}
        self.has_child = {pid for pid, p in parents.items() if p.has_child}
        # A path sum is only kept while the whole path was counted with one encoding.
        self.path_tokens = {
            pid: p.path_tokens if p.token_encoding == encoding else None
            for pid, p in parents.items()
        }

    def _new_segment(self, parent_segment: int | None, start_depth: int) -> int:
        self.segment += 1
        self.segments.append((self.segment, self.session_id, parent_segment, start_depth))
        return self.segment

    def place(self, entry: SessionEntry, body: str, tokens: int) -> tuple[Any, ...]:
        own = tokens if entry.kind == "message" else 0
        parent_id = entry.parent_id
        path_tokens: int | None
        if parent_id is None:
            depth, segment, path_tokens = 0, self._new_segment(None, 0), own
        else:
            depth = self.depth[parent_id] + 1
            if parent_id in self.has_child:
                segment = self._new_segment(self.segment_of[parent_id], depth)
            else:
                segment = self.segment_of[parent_id]
                self.has_child.add(parent_id)
            parent_path = self.path_tokens[parent_id]
            path_tokens = None if parent_path is None else parent_path + own
        self.seq += 1
        self.depth[entry.id] = depth
        self.segment_of[entry.id] = segment
        self.path_tokens[entry.id] = path_tokens
        return (
            self.seq,
            entry.id,
            self.session_id,
            parent_id,
            entry.kind,
            entry.role,
            entry.custom_type,
            entry.timestamp,
            depth,
            segment,
            tokens,
            self.encoding,
            path_tokens,
            body,
            message_data_json(entry),
        )

    def place_chain(
        self, batch: Sequence[SessionEntry], encoded: Sequence[tuple[str, int]]
    ) -> ChainRows:
        """The rows of a checked message chain (``is_message_chain``), for
        ``statements.insert_chain_statements``.

        Each entry after the first is the first child of the one before, so it continues
        that entry's segment one deeper: its seq, depth, segment and parent follow from
        the first entry's, and only what differs per entry is listed, without the
        per-entry lookups ``place`` makes for a parent anywhere in the batch. Call it last:
        the batch's own entries are not remembered as parents.
        """
        body, tokens = encoded[0]
        first = self.place(batch[0], body, tokens)
        first_id = batch[0].id
        path = self.path_tokens[first_id]
        values: builtins.list[Any] = [first_id, first[5], first[7], tokens, path, body]
        for index in range(1, len(batch)):
            entry = batch[index]
            body, tokens = encoded[index]
            if path is not None:
                path += tokens
            role = entry.message.role  # type: ignore[union-attr]  # a chain's are messages
            values += (entry.id, role, entry.timestamp, tokens, path, body)
        head = (
            self.session_id,
            self.encoding,
            self.seq,
            self.depth[first_id],
            self.segment_of[first_id],
            batch[0].parent_id,
        )
        self.seq += len(batch) - 1
        return ChainRows(head, values)


class ChainRows(NamedTuple):
    """A placed message chain: ``head`` is (session id, token encoding, and the first
    entry's seq, depth, segment and parent id); ``values`` holds ``CHAIN_ROW_VALUES`` per
    entry: its id, role, timestamp, tokens, path tokens and body."""

    head: tuple[Any, ...]
    values: builtins.list[Any]


def is_message_chain(batch: Sequence[SessionEntry]) -> bool:
    """True when every entry is a message without ``data`` and each after the first
    names the one before as its parent: what an agent appends (a turn, a transcript), and
    the shape whose rule checks and placement need only look at the first entry."""
    previous = None
    for entry in batch:
        # (A message without one is possible only through model_copy: the general path.)
        if (
            entry.kind != "message"
            or entry.message is None
            or entry.data is not None  # a chain row has no data column: the general path
            or (previous is not None and entry.parent_id != previous)
        ):
            return False
        previous = entry.id
    return True


def encode_batch(batch: Sequence[SessionEntry], estimator: TokenEstimator) -> list[tuple[str, int]]:
    """Each entry's stored body (its payload, ``stores/_rows.py``) and token count,
    computed once at append: ``(payload_json(e), estimator.count_entry(e))``.

    A plain message (string content, no tool calls) takes both straight from its message,
    as those two functions do for it, without their two calls per entry (unless the
    estimator counts entries its own way)."""
    if type(estimator).count_entry is not TokenEstimator.count_entry:
        with collector_paused():
            return [(payload_json(e), estimator.count_entry(e)) for e in batch]
    serializer = message_serializer()
    bodies: list[str] = []
    plain: list[str] = []
    with collector_paused():
        for e in batch:
            message = e.message
            if message is not None and not message.tool_calls and isinstance(message.content, str):
                bodies.append(
                    serializer.to_json(message, by_alias=True, exclude_none=True).decode()
                )
                plain.append(message.content)
            else:
                bodies.append(payload_json(e))
    # The plain messages' texts counted as one batch (on several threads when it is big:
    # see TokenEstimator.count_many), the rest one by one.
    counts = iter(estimator.count_many(plain))
    encoded: list[tuple[str, int]] = []
    for e, body in zip(batch, bodies, strict=True):
        message = e.message
        if message is not None and not message.tool_calls and isinstance(message.content, str):
            encoded.append((body, next(counts) + MESSAGE_OVERHEAD_TOKENS))
        else:
            encoded.append((body, estimator.count_entry(e)))
    return encoded


def outside_parent_ids(batch: Sequence[SessionEntry]) -> builtins.list[str]:
    """Parent ids that are not an earlier entry of the batch, in first-use order."""
    earlier: set[str] = set()
    outside: dict[str, None] = {}
    for entry in batch:
        if entry.parent_id is not None and entry.parent_id not in earlier:
            outside[entry.parent_id] = None
        earlier.add(entry.id)
    return builtins.list(outside)


async def lookup_parents(conn: SqlReader, ids: Sequence[str]) -> dict[str, _StoredParent]:
    """Session and tree position of each stored entry among ``ids``."""
    found: dict[str, _StoredParent] = {}
    for chunk in id_chunks(ids):
        sql = PARENTS_SQL.format(marks=", ".join("?" * len(chunk)))
        for row in await conn.execute_fetchall(sql, chunk):
            entry_id, session_id, segment, depth, path, encoding, has_child = row
            found[entry_id] = _StoredParent(
                session_id, depth, segment, bool(has_child), path, encoding
            )
    return found


async def state_and_parents(
    conn: SqlReader, session_id: str, ids: Sequence[str]
) -> tuple[tuple[Any, ...], dict[str, _StoredParent]]:
    """``STATE_SQL``'s row for ``session_id`` and ``lookup_parents(ids)``: one statement
    for a batch with up to ``LOOKUP_CHUNK`` outside parents (every usual append)."""
    first = builtins.list(ids[:LOOKUP_CHUNK])
    if not first:
        return tuple(await fetch_first_row(conn, STATE_SQL, (session_id,))), {}
    sql = STATE_AND_PARENTS_SQL.format(marks=", ".join("?" * len(first)))
    state: tuple[Any, ...] = ()
    found: dict[str, _StoredParent] = {}
    for tag, *row in await conn.execute_fetchall(sql, (session_id, *first)):
        if tag == 0:
            state = tuple(row[:4])
        else:
            entry_id, owner, segment, depth, path, encoding, has_child = row
            found[entry_id] = _StoredParent(owner, depth, segment, bool(has_child), path, encoding)
    found.update(await lookup_parents(conn, ids[LOOKUP_CHUNK:]))
    return state, found


def first_rule_failure(
    batch: Sequence[SessionEntry],
    root_id: str | None,
    parents: Mapping[str, _StoredParent],
    url: str,
) -> tuple[int, StoreRuleError] | None:
    """The first entry that breaks a root or parent rule, in the reference order.

    Duplicate ids are left to the caller; everything else matches ``TreeIndex.check``.
    """
    session_id = batch[0].session_id
    earlier: set[str] = set()
    for index, entry in enumerate(batch):
        if entry.parent_id is None:
            if root_id is not None:
                return index, RootExistsError(
                    f"entry {entry.id!r} has no parent, but session {session_id!r} "
                    f"already has its root {root_id!r}",
                    entry_id=entry.id,
                    session_id=session_id,
                    url=url,
                )
            root_id = entry.id
        elif entry.parent_id not in earlier:
            found = parents.get(entry.parent_id)
            if found is None:
                return index, UnknownParentError(
                    f"entry {entry.id!r} names parent {entry.parent_id!r}, "
                    "which is not in the store",
                    entry_id=entry.id,
                    session_id=session_id,
                    url=url,
                )
            if found.session_id != session_id:
                return index, SessionMismatchError(
                    f"entry {entry.id!r} of session {session_id!r} names parent "
                    f"{entry.parent_id!r} of session {found.session_id!r}",
                    entry_id=entry.id,
                    session_id=session_id,
                    url=url,
                )
        earlier.add(entry.id)
    return None


async def first_duplicate(
    conn: SqlReader,
    entries: Sequence[SessionEntry],
    url: str,
    *,
    stored_up_to: int | None = None,
) -> DuplicateEntryError | None:
    """The error for the first of ``entries`` whose id is already stored, if any.

    ``stored_up_to``: only rows up to that seq count as stored; after a failed insert
    the rows of the batch written before the failing one are visible in the transaction,
    and are not duplicates.
    """
    stored: set[str] = set()
    for chunk in id_chunks([e.id for e in entries]):
        marks = ", ".join("?" * len(chunk))
        sql = f"SELECT id FROM entries WHERE id IN ({marks})"
        params: builtins.list[Any] = chunk
        if stored_up_to is not None:
            sql, params = f"{sql} AND seq <= ?", [*chunk, stored_up_to]
        rows = await conn.execute_fetchall(sql, params)
        stored.update(row[0] for row in rows)
    for entry in entries:
        if entry.id in stored:
            return DuplicateEntryError(
                f"entry id {entry.id!r} already exists in the store",
                entry_id=entry.id,
                session_id=entry.session_id,
                url=url,
            )
    return None


def check_leaf_session(entry_id: str, session_id: str, owner: str | None, url: str) -> None:
    """Raise unless ``entry_id`` is stored in ``session_id`` (``owner`` is its session)."""
    if owner is None:
        raise EntryNotFoundError(
            f"entry {entry_id!r} is not in the store",
            entry_id=entry_id,
            session_id=session_id,
            url=url,
        )
    if owner != session_id:
        raise SessionMismatchError(
            f"entry {entry_id!r} belongs to session {owner!r}, not {session_id!r}",
            entry_id=entry_id,
            session_id=session_id,
            url=url,
        )


def id_chunks(items: Sequence[str]) -> Iterable[builtins.list[str]]:
    for start in range(0, len(items), LOOKUP_CHUNK):
        yield builtins.list(items[start : start + LOOKUP_CHUNK])


def sorted_pieces(rows: Iterable[tuple[int, int, int]]) -> builtins.list[tuple[int, int, int]]:
    """Rows of ``BRANCH_PIECES_SQL`` (``(segment_id, lo, hi)`` tuples), root first."""
    return sorted(((int(s), int(lo), int(hi)) for s, lo, hi in rows), key=lambda p: p[1])


def _on_pieces(pieces: Iterable[tuple[int, int, int]], segment_id: int, depth: int) -> bool:
    return any(s == segment_id and lo <= depth <= hi for s, lo, hi in pieces)


async def memory_head_of(
    position: LeafPosition, fetch: Callable[[str, Params], Awaitable[builtins.list[Any]]]
) -> str | None:
    """The newest memory record on the branch ending at ``position``: O(pieces) reads."""
    pieces = sorted_pieces(await fetch(BRANCH_PIECES_SQL, position.params()))
    for segment_id, lo, hi in reversed(pieces):
        rows = await fetch(MEMORY_HEAD_SQL, (segment_id, lo, hi))
        if rows:
            return str(rows[0][0])
    return None


async def _position_on(conn: SqlReader, entry_id: str) -> LeafPosition:
    """The position of a stored entry, read inside the write transaction."""
    segment_id, depth, path_tokens, encoding = await fetch_first_row(
        conn, POSITION_SQL, (entry_id,)
    )
    return LeafPosition(entry_id, segment_id, depth, path_tokens, encoding)


async def first_memory_failure(
    conn: SqlReader,
    batch: Sequence[SessionEntry],
    limit: int,
    parse: ParseBody,
    records: dict[str, MemoryRecord] | None = None,
) -> tuple[int, StoreRuleError] | None:
    """The first ``om.*`` record of ``batch[:limit]`` that its branch does not support.

    Each record parsed here is kept in ``records`` (by entry id), so that writing the
    fold rows afterwards does not parse it again.
    """
    checked = batch[:limit]
    if all(entry.kind == "message" for entry in checked):
        # Messages carry no record, and the walk below keeps them only for later records.
        return None
    earlier: dict[str, SessionEntry] = {}
    for index, entry in enumerate(checked):
        try:
            record = None if entry.kind == "message" else parse_memory_record(entry)
            if record is not None and records is not None:
                records[entry.id] = record
            needs = record_needs(record)
            if needs is not None:
                evidence = await _path_evidence(conn, entry.parent_id, earlier, needs, parse)
                facts = branch_facts_from_entries(evidence, needs)
                validate_memory_record(entry, needs, facts)
        except MemoryRecordError as exc:
            return index, exc
        earlier[entry.id] = entry
    return None


async def _path_evidence(
    conn: SqlReader,
    parent_id: str | None,
    earlier: Mapping[str, SessionEntry],
    needs: MemoryRecordNeeds,
    parse: ParseBody,
) -> builtins.list[SessionEntry]:
    """The entries on the path from the root to ``parent_id`` that bear on ``needs``.

    Earlier entries of the batch are walked in memory; of the stored rest of the path,
    only the entries ``needs`` names and the memory records are read.
    """
    evidence: builtins.list[SessionEntry] = []
    current = parent_id
    while current is not None and current in earlier:
        evidence.append(earlier[current])
        current = earlier[current].parent_id
    if current is None:
        return evidence
    position = await _position_on(conn, current)
    pieces = sorted_pieces(await fetch_rows(conn, BRANCH_PIECES_SQL, position.params()))
    # An id no entry can have (a NUL, which PostgreSQL cannot even compare) is on no
    # path: it is left out of the lookups, and the record refused for it as on any store.
    for chunk in id_chunks(_storable(needs.source_entry_ids | needs.covered_entry_ids)):
        sql = ENTRIES_BY_ID_SQL.format(marks=", ".join("?" * len(chunk)))
        for segment_id, depth, *row in await fetch_rows(conn, sql, chunk):
            if _on_pieces(pieces, segment_id, depth):
                evidence.append(parse(row))
    # The memory ids are looked up in the fold tables, by id, not by a branch scan; a
    # recording entry that lies on the path is evidence.
    recorders: set[int] = set()
    for chunk in id_chunks(_storable(needs.memory_ids_to_look_up)):
        marks = ", ".join("?" * len(chunk))
        for table in ("om_observations", "om_reflections"):
            sql = MEMORY_BY_ID_SQL.format(table=table, marks=marks)
            for seq, segment_id, depth in await fetch_rows(conn, sql, chunk):
                if _on_pieces(pieces, segment_id, depth):
                    recorders.add(seq)
    # A reflection a record supersedes must not be superseded on the path already: the
    # records that supersede it there are evidence too.
    for chunk in id_chunks(_storable(needs.referenced_reflection_ids)):
        sql = MEMORY_BY_ID_SQL.format(table="om_supersessions", marks=", ".join("?" * len(chunk)))
        for seq, segment_id, depth in await fetch_rows(conn, sql, chunk):
            if _on_pieces(pieces, segment_id, depth):
                recorders.add(seq)
    for chunk in id_chunks([str(seq) for seq in sorted(recorders)]):
        sql = ENTRIES_BY_SEQ_SQL.format(marks=", ".join("?" * len(chunk)))
        for row in await fetch_rows(conn, sql, [int(seq) for seq in chunk]):
            evidence.append(parse(row))
    return evidence


def _storable(ids: Iterable[str]) -> builtins.list[str]:
    """The ids an entry or a memory record could have, sorted."""
    return sorted(i for i in ids if id_problem(i) is None)


def check_page_head(
    *,
    session_id: str,
    leaf_id: str | None,
    cursor: str,
    head: tuple[str | None, str | None, int | None, str | None, str | None],
    url: str,
) -> None:
    """The checks of a page read's first row, shared by the SQLite and PostgreSQL pages:
    ``head`` is (current leaf, its owner, the cursor's depth on the branch, its kind, its
    role), None where the statement found nothing."""
    current, owner, depth, kind, role = head
    if leaf_id is not None:
        check_leaf_session(leaf_id, session_id, owner, url)
    elif current is not None and owner is None:
        raise CorruptStoreError(
            f"session {session_id!r} in {url}: its leaf {current!r} has no row", url=url
        )
    if depth is None:
        raise EntryNotFoundError(
            f"cursor {cursor!r} is not an entry of the current branch",
            entry_id=cursor,
            session_id=session_id,
            url=url,
        )
    if kind != "message" or role not in ELIGIBLE_SOURCE_ROLES:
        raise InvalidInputError(
            f"cursor {cursor!r} is a {kind} entry, not a user, assistant or tool message",
            entry_id=cursor,
            session_id=session_id,
            url=url,
        )
