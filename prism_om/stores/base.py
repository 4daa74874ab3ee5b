"""The ``SessionStore`` protocol every adapter implements, and the rules they share."""

from __future__ import annotations

import abc
import builtins
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Literal, NamedTuple, Protocol, Self, runtime_checkable

from ..core.branch_reads import entries_after_cursor, last_eligible_messages, page_around_cursor
from ..core.branch_snapshot import BranchSnapshot
from ..core.ledger import (
    ObservationalMemoryLedger,
    branch_source_times,
    extend_observational_memory_ledger,
    fold_ledger,
)
from ..core.ledger_views import live_ledger, restrict_ledger
from ..core.limits import MAX_ENTRY_BYTES
from ..core.redaction import Redactor
from ..core.scope_map import WorkScopeMap, fold_work_scope_map
from ..core.tombstones import TOMBSTONE_SESSION_PREFIX, check_tombstone_entry
from ..core.validation import check_memory_record_caps
from ..entries import (
    Message,
    SessionEntry,
    check_entry_size,
    find_lone_surrogate,
    find_unstorable,
    plain_message_within,
    plain_messages_within,
    validate_session_id,
)
from ..errors import (
    DuplicateEntryError,
    EntryNotFoundError,
    InvalidEntryError,
    InvalidInputError,
    PrismMemoryError,
    SessionMismatchError,
    SessionNotFoundError,
    StaleCoverageError,
    StoreClosedError,
    StoreError,
)
from ..tokens import get_estimator
from .arguments import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    check_batch_argument,
    check_count,
    check_custom_type,
    check_entry_id,
    check_id_list,
    check_leaf_id,
    check_page_args,
)
from .search import (
    MessageCandidate,
    SearchHit,
    SearchKind,
    check_search,
    run_search,
    scan_message_candidates,
)
from .snapshot import read_branch_snapshot

__all__ = [
    "ANY_MEMORY_HEAD",
    "AnyMemoryHead",
    "AppendFault",
    "ErasureReport",
    "MarkedData",
    "MessagePart",
    "SOURCES_READ_AHEAD",
    "StoreLifecycle",
    "SessionStore",
    "SessionSummary",
    "SessionTree",
    "StoreBase",
    "chain_at_leaf",
    "check_batch_shape",
    "check_memory_head",
    "check_page_args",
    "read_memory_with_sources",
    "session_not_found",
]


SOURCES_READ_AHEAD: Final = 64
"""Source entries ``memory_with_sources`` reads with a memory's rows at least."""


class MarkedData(NamedTuple):
    """One entry of ``SessionStore.marked_data``: its ``data``, and its message as wire
    JSON (camelCase keys, absent fields left out) when it is a message entry, else None."""

    data: dict[str, Any]
    message: dict[str, Any] | None


MessagePart = tuple[str, str, Message]
"""(entry id, timestamp, message) of one message of a page: what a SQL store's
``page_message_parts`` answers in place of ``page_messages``' entries (the same messages,
in the same order), so the public page builds its items without an entry per row."""


@runtime_checkable
class SessionTree(Protocol):
    """The tree operations: what an adapter must implement (``StoreBase`` derives the rest).

    An append-only forest of session entry trees.

    Rules every adapter keeps:

    * entry ids are unique across the whole store;
    * a parent exists in the same session; a session has exactly one root
      (``parent_id=None``);
    * appending to an entry that already has a child starts a new branch;
    * a rejected append or batch writes nothing; a batch belongs to one session;
    * each session has a persisted current leaf: an append moves it to the new entry,
      ``checkout`` moves it anywhere in the session (so the next append forks);
    * ``append``/``append_many`` place entries under the parents they name (two writers
      naming one parent fork the tree); ``append_at_leaf`` places a batch at the leaf it
      resolves inside the store's write lock, so concurrent writers chain one after
      another, in-process and across processes;
    * ``page_messages`` checks ``limit`` (an int, 1 to 100) and ``direction`` before it
      reads, with the errors of the public page functions;
    * an appended ``om.*`` record must be supported by the branch it lands on (its sources,
      cursors and cited memory ids earlier on that branch, its new ids not recorded there
      yet): ``prism_om.core.validation.validate_memory_record_on_branch(entry, path)``
      checks one entry against the path from the root to its parent (within a batch the
      path includes the batch's earlier entries) and raises ``MemoryRecordError``;
    * ``entries(session_id, leaf_id)`` and ``checkout(session_id, entry_id)`` raise
      ``EntryNotFoundError`` for an id that is in no session of the store and
      ``SessionMismatchError`` for an entry of another session, before anything changes.
      ``entries`` with no ``leaf_id`` returns ``[]`` for a session without entries;
    * a ``tombstones.<scope>`` session holds only well-formed ``prism.tombstones.recorded``
      records for ``<scope>``, and that record type nowhere else
      (``prism_om.core.tombstones``; ``TombstoneRecordError`` naming the entry and field);
    * every error about an entry, a session or the store carries them as attributes
      (``entry_id``, ``session_id``, ``url``; ``memory_id`` for a memory record) and its
      message quotes the offending id (``f"entry {entry_id!r} ..."``).

    Cancellation: a write call that has begun runs to its end, even when the calling
    task is cancelled, and only then re-raises ``CancelledError``. "Its end" is the
    write stored whole, or rejected with nothing stored: a cancelled ``append_many`` /
    ``append_at_leaf`` batch is in the store entirely or not at all, and a cancelled
    call never leaves a transaction, lock or half-written line behind for the next
    writer (in this process or another). A call cancelled before it starts running
    writes nothing. ``checkout`` follows the same rule.
    """

    url: str

    async def append(self, entry: SessionEntry) -> None:
        """Append one entry."""

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        """Append a batch of one session's entries, all or nothing."""

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        """Append a batch at the session's current leaf, as resolved inside the write lock.

        The batch is a chain: its first entry goes under the leaf (it becomes the root of
        a session with no entries yet), each later entry under the one before it; the
        ``parent_id`` the entries carry is replaced. Returns the entries as stored, with
        their parents. Every other rule of ``append_many`` holds.

        With ``expected_memory_head`` (an entry id, or None for "no memory record yet"),
        the batch is appended only while ``memory_head()`` at the resolved leaf still
        equals it, checked inside the same write lock; else ``StaleCoverageError`` and
        nothing is stored. A memory worker passes the head it read before it started, so
        two workers over the same coverage cannot both record.
        """

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        """Id of the newest memory record on the branch, or None when it has none.

        Memory records are ``om.observations.recorded``, ``om.reflections.recorded``,
        ``om.observations.dropped`` and compactions carrying ``om.folded`` memory; scope
        records and plain compactions are not: ``prism_om.core.records.is_memory_record``
        is that test. Any new memory record moves the head, so it stands for the branch's
        whole memory coverage. Raises what ``entries`` raises for ``leaf_id``.
        """

    async def get(self, entry_id: str) -> SessionEntry | None:
        """The entry with this id, from any session, or None."""

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist, by id (missing ids are left out)."""

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session in append order (empty for an unknown session)."""

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The path from the root to ``leaf_id`` (default: the current leaf), root first.

        ``EntryNotFoundError`` when ``leaf_id`` is in no session of the store,
        ``SessionMismatchError`` when it belongs to another session; ``[]`` when
        ``leaf_id`` is None and the session has no entries.
        """

    async def leaves(self, session_id: str) -> builtins.list[str]:
        """Ids of the session's entries that have no child, in append order."""

    async def leaf(self, session_id: str) -> str | None:
        """The session's persisted current leaf, or None for an unknown session."""

    async def checkout(self, session_id: str, entry_id: str) -> None:
        """Move the session's current leaf to one of its entries.

        ``EntryNotFoundError`` when ``entry_id`` is in no session of the store,
        ``SessionMismatchError`` when it belongs to another session; the leaf stays.
        """

    async def delete_session(self, session_id: str) -> int:
        """Erase a session: every entry, branch, leaf, fold row and summary, all at once.

        Returns how many entries were removed. ``SessionNotFoundError`` for a session with
        no entries, before anything changes. The removal is all or nothing (one
        transaction; the cancellation rule of writes holds) and leaves every other
        session as it was. Tombstones are not touched: they live in their own
        ``tombstones.<scope>`` sessions, hold ids and never text, and keep a revocation
        in force should the same ids come back (a restored backup, a re-import).
        """

    async def sessions(self) -> builtins.list[str]:
        """Every session id of the store, in order of creation."""

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        """Each session's counts (``SessionSummary``), in order of creation."""

    async def close(self) -> None:
        """Release files and connections; idempotent."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@runtime_checkable
class SessionStore(SessionTree, Protocol):
    """A ``SessionTree`` with its memory and branch reads: what the services call.

    Each read is defined by the pure functions over ``entries()``; ``StoreBase`` implements
    every one of them that way, and an adapter overrides one only to answer it faster
    (SQLite answers them all from its fold tables and indexes). The conformance suite
    checks both give identical results.
    """

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        """True when ``entry_id`` lies on the path from the root to the leaf."""

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's folded observational-memory ledger.

        Equal to ``fold_observational_memory_ledger(await self.entries(...))``; an indexed
        store answers it from fold tables, at a cost that follows the memory, not the
        transcript.
        """

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger less its dropped observations and superseded reflections
        (and both lists): ``prism_om.core.ledger_views.live_ledger(ledger())``.

        Gives the same active memory as ``ledger()`` when nothing is invalidated; the
        per-turn context reads it, so a turn costs the live memory, not all ever recorded.
        """

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger restricted to ``memory_ids``: their observations,
        reflections and drops, without coverage cursors. Exact-id recall reads this."""

    async def taken_memory_ids(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> builtins.set[str]:
        """Which of ``memory_ids`` an observation or reflection of the branch already holds,
        dropped and superseded ones included: the ids a newly minted one must avoid.

        Answered from ``memory_subset`` (a lookup by id), so the workers check the ids
        they mint without reading every memory id ever recorded on the branch.
        """

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap:
        """The branch's folded work-scope map (equal to ``fold_work_scope_map``)."""

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The branch's last ``count`` user/assistant/tool messages, oldest first."""

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """Branch entries strictly after ``after_id`` (all when None), root side first."""

    async def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """Up to ``limit`` user/assistant/tool messages after (or before) ``cursor``.

        Oldest first, with whether more lie beyond. ``EntryNotFoundError`` when the cursor
        is off the branch; ``InvalidInputError`` when it is not an eligible message, or
        for a bad ``limit`` or ``direction`` (``PageTooLargeError`` above 100).
        """

    async def page_message_parts(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[MessagePart], bool]:
        """``page_messages`` as ``(id, timestamp, message)`` parts (``MessagePart``): the
        same messages, checks and errors, for a caller that needs no whole entries (the
        public page). ``StoreBase`` derives it from ``page_messages``."""

    async def memory_with_sources(
        self, session_id: str, memory_id: str
    ) -> tuple[ObservationalMemoryLedger, dict[str, SessionEntry]]:
        """What an exact recall by id reads: ``memory_subset(session_id, [memory_id])`` at
        the session's current leaf, and the entries its observations cite, by id (at least
        the first ``SOURCES_READ_AHEAD`` cited, in citation order; a caller reads any
        other by id). ``StoreBase`` derives it from ``memory_subset`` and ``get_many``; a
        SQL store reads both in one statement."""

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        """Number of entries on the branch (its length, root included)."""

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int:
        """Estimated tokens of the branch's message entries (counted once, at append)."""

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The latest compaction entry on the branch, or None."""

    async def marked_data(
        self, session_id: str, custom_type: str, leaf_id: str | None = None
    ) -> builtins.list[MarkedData]:
        """The ``data`` of the branch's entries marked ``custom_type`` (custom entries, and
        message entries that carry data), root first, each with its message's wire form
        when it is a message entry.

        Equal to ``[MarkedData(e.data, e.message.to_wire() if e.message else None) for e
        in await self.entries(...) if e.custom_type == custom_type]``, as fresh objects the
        caller may change. A reader of one record type (such as ``PrismSession.get_items()``,
        of its SDK items) costs the rows it returns: SQL stores read those rows' payload
        columns only and build no entry. ``InvalidInputError`` for a ``custom_type`` that
        is not a non-empty string; raises what ``entries`` raises for ``leaf_id``.
        """

    async def snapshot(
        self,
        session_id: str,
        *,
        recent: int = 8,
        leaf_id: str | None = None,
        full: bool = False,
    ) -> BranchSnapshot:
        """The branch's memory state at one leaf (``core.branch_snapshot.BranchSnapshot``).

        The memory head, the live ledger (the whole ledger with ``full``), the scope map,
        the entries after the observer's coverage, the last ``recent`` eligible messages and
        the counters, every part read at the same leaf: ``leaf_id``, else the current leaf
        resolved once, first. Equal to ``core.branch_snapshot.snapshot_from_branch`` of
        ``entries(session_id, leaf_id)``; an adapter answers it with
        ``stores.snapshot.read_branch_snapshot`` over its own reads (SQLite in one hop to
        its reader). Raises what ``entries`` raises for ``leaf_id``.
        """

    async def search(
        self,
        session_id: str,
        query: str,
        *,
        limit: int = 10,
        kinds: Iterable[SearchKind] | None = None,
        leaf_id: str | None = None,
        include_inactive: bool = False,
        invalidated_ids: Iterable[str] | None = None,
        secrets: Iterable[str] | Redactor | None = None,
    ) -> builtins.list[SearchHit]:
        """Ranked lexical search over the branch's memory and eligible messages.

        The branch (``leaf_id``, else the current leaf) is searched for ``query``: its
        active observations, active reflections and user/assistant/tool messages (only
        ``kinds`` of them, when given), best first, at most ``limit`` (1-100); with
        ``include_inactive`` dropped observations and superseded reflections too, marked in
        ``SearchHit.status``. What ``invalidated_ids`` withholds never matches, and every
        text is redacted of ``secrets`` before it is ranked (a query term of a secret is
        dropped). Terms, withholding and ranking are ``stores.search``'s, shared by every
        adapter: an adapter only fetches the candidates by its index, so all return the
        same hits in the same order. Bad arguments raise ``InvalidInputError`` (its
        subclasses ``LimitExceededError`` for a query beyond its bounds and
        ``PageTooLargeError`` for ``limit``) before anything is read; ``leaf_id`` raises
        what ``entries`` raises. ``StoreBase`` scans the branch's messages, keeping each
        message's keys; SQLite and PostgreSQL read a term index kept in the append.
        """

    async def damaged_sessions(self) -> dict[str, StoreError]:
        """Sessions found damaged so far, by id, with the error their reads raise (a store
        that keeps sessions apart, such as JSONL, reads the others). ``StoreBase``: none."""

    async def erasure_report(self) -> ErasureReport:
        """What of the latest ``delete_session`` this store could not erase itself
        (``ErasureReport``). ``StoreBase``: nothing."""


@dataclass(frozen=True)
class ErasureReport:
    """What a ``delete_session`` left for someone else to erase.

    ``wal_frames_pending``: SQLite WAL frames another process's reader kept from being
    copied back (the text stays in the file's bytes until the next checkpoint).
    ``rewrite_statement``: for a server that keeps deleted rows' bytes in its files (and
    its WAL) until a rewrite, the statement that rewrites them (PostgreSQL:
    ``VACUUM FULL``); None when the store holds no copy after the delete.
    """

    wal_frames_pending: int = 0
    rewrite_statement: str | None = None

    @property
    def server_keeps_text(self) -> bool:
        return self.rewrite_statement is not None


def _copy_data(data: dict[str, Any] | None) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(data))
    return copied


def check_batch_shape(
    entries: Iterable[SessionEntry], *, url: str | None = None
) -> builtins.list[SessionEntry]:
    """Checks that need no store: entry types, one session, no id twice in the batch, and
    each entry's serialised size within ``MAX_ENTRY_BYTES`` (``EntryTooLargeError``), the
    per-record id caps (``MemoryRecordTooLargeError``) and the tombstone rule
    (``TombstoneRecordError``, ``prism_om.core.tombstones``). These are append rules: a
    store loading what it holds does not re-apply them. Pass the store's ``url`` so the
    errors carry it."""
    try:
        return _check_batch_shape(entries)
    except PrismMemoryError as exc:
        exc.add_context(url=url)
        raise


def _check_batch_shape(entries: Iterable[SessionEntry]) -> builtins.list[SessionEntry]:
    batch = check_batch_argument(entries)
    if not batch:
        return batch
    # The usual batch (a turn, a transcript): every check below passes for it, unless it
    # is for a tombstone session, which holds no messages.
    if plain_messages_within(batch, MAX_ENTRY_BYTES) and not _in_tombstones(batch[0]):
        validate_session_id(batch[0].session_id)
        return batch
    seen: set[str] = set()
    session_id = None
    for index, entry in enumerate(batch):
        if not isinstance(entry, SessionEntry):
            raise InvalidEntryError(
                f"expected a SessionEntry, got {type(entry).__name__} (entries[{index}]); "
                "build one from its wire form with prism_om.entries.entry_from_wire(wire)",
                field=f"entries[{index}]",
            )
        # First: the checks below could recurse on deep data, or meet a non-string id.
        unstorable = find_unstorable(entry)
        if unstorable is not None:
            field, problem = unstorable
            named = isinstance(entry.id, str)
            raise InvalidEntryError(
                f"{f'entry {entry.id!r}' if named else f'entries[{index}]'}: "
                f"field {field!r} {problem}",
                field=field,
                entry_id=entry.id if named else None,
                session_id=entry.session_id if isinstance(entry.session_id, str) else None,
            )
        if session_id is None:
            # The others must equal it, so one check covers the batch.
            session_id = validate_session_id(entry.session_id)
        elif entry.session_id != session_id:
            raise SessionMismatchError(
                f"entry {entry.id!r} belongs to session {entry.session_id!r}, but the batch "
                f"is for session {session_id!r}: a batch holds one session's entries",
                entry_id=entry.id,
                session_id=entry.session_id,
            )
        if entry.id in seen:
            raise DuplicateEntryError(
                f"entry id {entry.id!r} appears twice in the batch",
                entry_id=entry.id,
                session_id=session_id,
            )
        seen.add(entry.id)
        # A tombstone session holds only well-formed tombstone records (core.tombstones):
        # one that the read path would have to skip is refused here, on every adapter.
        check_tombstone_entry(entry)
        if plain_message_within(entry, MAX_ENTRY_BYTES):
            # The usual entry: within the size cap, no record to cap, no surrogate.
            continue
        # Before any store work: an oversized entry would otherwise cost its tokenisation
        # and a huge write before being refused (or worse, accepted).
        check_entry_size(entry, MAX_ENTRY_BYTES)
        check_memory_record_caps(entry)
        # An entry copied with model_copy(update=...) skipped validation; no adapter may
        # store text that SQLite and JSONL could not even write.
        where = find_lone_surrogate(entry)
        if where is not None:
            raise InvalidEntryError(
                f"entry {entry.id!r}: field {where!r} holds a lone surrogate (half of a "
                "UTF-16 pair); entry text must be valid Unicode",
                field=where,
                entry_id=entry.id,
                session_id=entry.session_id,
            )
    return batch


def _in_tombstones(entry: SessionEntry) -> bool:
    return entry.session_id.startswith(TOMBSTONE_SESSION_PREFIX)


def chain_at_leaf(
    entries: Sequence[SessionEntry], leaf_id: str | None
) -> builtins.list[SessionEntry]:
    """The batch re-parented as ``append_at_leaf`` stores it: a chain under ``leaf_id``."""
    chained: builtins.list[SessionEntry] = []
    parent = leaf_id
    for entry in entries:
        chained.append(
            entry if entry.parent_id == parent else entry.model_copy(update={"parent_id": parent})
        )
        parent = entry.id
    return chained


class _SubsetReads(Protocol):
    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger: ...

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]: ...


async def read_memory_with_sources(
    store: _SubsetReads, session_id: str, memory_id: str
) -> tuple[ObservationalMemoryLedger, dict[str, SessionEntry]]:
    """``SessionStore.memory_with_sources`` from two reads: the id's rows, then the first
    ``SOURCES_READ_AHEAD`` entries its observations cite, by id."""
    memory_id = check_entry_id(memory_id, "memory_id")
    subset = await store.memory_subset(session_id, [memory_id])
    cited = dict.fromkeys(s for r in subset.observations for s in r.observation.source_entry_ids)
    wanted = builtins.list(cited)[:SOURCES_READ_AHEAD]
    return subset, (await store.get_many(wanted) if wanted else {})


def session_not_found(session_id: str, url: str | None) -> SessionNotFoundError:
    """The error ``delete_session`` raises for a session with no entries."""
    return SessionNotFoundError(
        f"session {session_id!r} has no entries in {url}: nothing to delete",
        session_id=session_id,
        url=url,
    )


def check_memory_head(
    session_id: str, expected: str | AnyMemoryHead | None, actual: str | None
) -> None:
    """Raise ``StaleCoverageError`` when the branch's memory head moved past ``expected``."""
    if expected is ANY_MEMORY_HEAD or expected == actual:
        return
    raise StaleCoverageError(
        f"session {session_id!r}: memory coverage moved (head {actual!r}, expected "
        f"{expected!r}); another worker recorded first, so this run's records were not stored",
        session_id=session_id,
    )


AppendFault = Callable[[Sequence[SessionEntry]], None]
"""A test's fault for the append commit point (see ``prism_om.testing.faults``)."""


class StoreLifecycle(abc.ABC):
    """What every adapter shares: ``append``, ``async with``, the closed check, the fault point.

    An adapter sets ``url``, sets ``_closed`` in ``close()``, and implements
    ``append_many``, ``close`` and ``delete_session``. Inside its append transaction,
    after every rule check and before the batch becomes visible, it calls
    ``self._append_fault_point(batch)``
    with the entries as they will be stored: a fault installed by
    ``prism_om.testing.faults.inject_append_fault`` runs there, and what it raises
    leaves the store as it was (a process it kills leaves no part of the batch either).
    """

    url: str
    _closed: bool = False
    # Only prism_om.testing.faults sets it; unused, it costs one attribute read a batch.
    _append_fault: AppendFault | None = None

    @abc.abstractmethod
    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        """Append a batch of one session's entries, all or nothing."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release files and connections; idempotent."""

    @abc.abstractmethod
    async def delete_session(self, session_id: str) -> int:
        """Erase a session (see ``SessionTree.delete_session``); returns its entry count."""

    async def append(self, entry: SessionEntry) -> None:
        """Append one entry (``append_many([entry])``)."""
        await self.append_many([entry])

    async def taken_memory_ids(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> builtins.set[str]:
        """Which of ``memory_ids`` the branch's observations or reflections hold (see
        ``SessionStore.taken_memory_ids``): one ``memory_subset`` read, by id."""
        store: SessionStore = self  # type: ignore[assignment]
        subset = await store.memory_subset(session_id, memory_ids, leaf_id)
        return {r.id for r in subset.observations} | {r.id for r in subset.reflections}

    def _check_open(self) -> None:
        """Raise ``StoreClosedError`` after ``close()``."""
        if self._closed:
            raise StoreClosedError(f"store {self.url!r} is closed", url=self.url)

    def _append_fault_point(self, batch: Sequence[SessionEntry]) -> None:
        fault = self._append_fault
        if fault is not None:
            fault(batch)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


# Ledgers a ``StoreBase`` remembers, by leaf id (oldest evicted first).
_LEDGER_CACHE_SIZE = 64
# Messages whose search keys a ``StoreBase`` remembers (a few hundred bytes each).
_SEARCH_KEYS_CACHE_SIZE = 200_000


def remember_ledger(
    cache: dict[str, ObservationalMemoryLedger], leaf_id: str, ledger: ObservationalMemoryLedger
) -> None:
    """Keep the ledger of ``leaf_id``, forgetting the oldest kept once the cache is full."""
    if len(cache) >= _LEDGER_CACHE_SIZE:
        cache.pop(next(iter(cache)))
    cache[leaf_id] = ledger


class StoreBase(StoreLifecycle):
    """The documented base for an adapter: implement the tree, inherit the reads.

    An adapter **must implement** the ``SessionTree`` operations: ``append_many``,
    ``append_at_leaf``, ``memory_head``, ``get``, ``list``, ``entries``, ``leaves``,
    ``leaf``, ``checkout``, ``sessions``, ``session_summaries``, ``delete_session`` and
    ``close`` (which sets ``_closed``), keeping every rule written on ``SessionTree``. It calls
    ``super().__init__()``, sets ``url``, calls ``_check_open()`` before touching its
    data, and calls ``_append_fault_point(batch)`` at its append commit point (see
    ``StoreLifecycle``). What those raise: ``InvalidInputError`` and its subclasses for a
    bad batch or id (``check_batch_shape`` does the store-free checks), a
    ``StoreRuleError`` subclass for an append or move the tree refuses (nothing stored),
    ``StoreClosedError`` after ``close()``, and another ``StoreError`` when the storage
    underneath fails. ``entries`` and ``checkout`` raise ``EntryNotFoundError`` (with
    ``entry_id``, ``session_id`` and ``url``) for an id in no session of the store and
    ``SessionMismatchError`` for an entry of another session. Every error names what it
    is about in its attributes and quotes the offending id in its message.

    The public helpers an adapter builds on, so it keeps the rules without copying them:

    * ``check_batch_shape(entries, url=self.url)``: the store-free batch checks, first;
    * ``prism_om.entries.validate_session_id(session_id)``: the session id rule, for
      reads that take one (``InvalidSessionIdError``);
    * ``prism_om.stores.arguments``: the rule of every other argument, called at the
      method's entry: ``check_entry_id`` for ``get`` and ``checkout``, ``check_leaf_id``
      for a ``leaf_id`` (``entries``, ``memory_head``), ``check_expected_memory_head``
      for ``append_at_leaf`` (``InvalidIdError``, naming the argument in ``field``);
    * ``prism_om.core.validation.validate_memory_record_on_branch(entry, path)``: each
      appended entry against the path from the root to its parent (the batch's earlier
      entries included); raises ``MemoryRecordError``, to which the adapter adds its
      ``url`` (``exc.add_context(url=self.url)``) before re-raising;
    * ``prism_om.core.records.is_memory_record(entry)``: which entries move
      ``memory_head``;
    * ``check_memory_head`` and ``chain_at_leaf``: the compare and the re-parenting of
      ``append_at_leaf``, both inside the adapter's write lock;
    * ``prism_om.core.timestamps.utc_timestamp``: ``SessionSummary.last_activity``.

    An adapter whose writes never yield to the event loop (a dict, say) meets the
    cancellation rule trivially; one that awaits inside a write runs the write as its own
    task and, when cancelled, waits for it to end (``asyncio.shield``) before re-raising.
    ``prism_om.testing.dict_store.DictStore`` is a complete adapter over plain dicts that
    uses only these helpers; ``tests/stores/test_outside_adapter.py`` runs both
    conformance suites over it.

    It **inherits**, and **may override** for speed, ``append`` and ``async with`` (from
    ``StoreLifecycle``), ``get_many``, ``is_on_branch`` and every read of
    ``SessionStore`` beyond the tree: ``ledger``, ``live_ledger``, ``memory_subset``,
    ``scope_map``, ``recent_messages``, ``entries_after``, ``page_messages``,
    ``entry_count``, ``branch_tokens``, ``last_compaction``, ``marked_data`` and ``search``.
    Each is derived from ``entries()`` with the pure reference functions, costs O(branch),
    and raises what ``entries()`` raises, plus ``EntryNotFoundError`` /
    ``InvalidInputError`` where ``SessionStore`` says so. The conformance suite
    (``prism_om.testing.conformance``)
    checks an override gives the same answers.
    """

    # A branch never changes once its leaf exists, so the ledger of a leaf stays right.
    _ledger_cache: dict[str, ObservationalMemoryLedger]
    # Live views kept the same way, by the record (or leaf) they end at.
    _live_cache: dict[str, ObservationalMemoryLedger]
    # Token counts by encoding name, then entry id (an entry's text never changes).
    _token_cache: dict[str, dict[str, int]]
    # Each searched message's index keys, by entry id (oldest evicted first).
    _search_keys: dict[str, tuple[int, ...]]

    def __init__(self) -> None:
        self._ledger_cache = {}
        self._live_cache = {}
        self._token_cache = {}
        self._search_keys = {}

    @abc.abstractmethod
    async def append_many(self, entries: Sequence[SessionEntry]) -> None: ...

    @abc.abstractmethod
    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]: ...

    @abc.abstractmethod
    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None: ...

    @abc.abstractmethod
    async def get(self, entry_id: str) -> SessionEntry | None: ...

    @abc.abstractmethod
    async def list(self, session_id: str) -> builtins.list[SessionEntry]: ...

    @abc.abstractmethod
    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]: ...

    @abc.abstractmethod
    async def leaves(self, session_id: str) -> builtins.list[str]: ...

    @abc.abstractmethod
    async def leaf(self, session_id: str) -> str | None: ...

    @abc.abstractmethod
    async def checkout(self, session_id: str, entry_id: str) -> None: ...

    @abc.abstractmethod
    async def sessions(self) -> builtins.list[str]: ...

    @abc.abstractmethod
    async def session_summaries(self) -> builtins.list[SessionSummary]: ...

    @abc.abstractmethod
    async def close(self) -> None: ...

    def _forget_cached(self) -> None:
        """Drop the remembered ledgers and token counts, after a ``delete_session``: ids
        that come back later (a re-import) must not find the erased session's."""
        self._ledger_cache.clear()
        self._live_cache.clear()
        self._token_cache.clear()
        self._search_keys.clear()

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist (one ``get`` each)."""
        found: dict[str, SessionEntry] = {}
        for entry_id in dict.fromkeys(check_id_list(entry_ids, "entry_ids")):
            entry = await self.get(entry_id)
            if entry is not None:
                found[entry_id] = entry
        return found

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        """True when ``entry_id`` lies on the branch (a scan of ``entries()``)."""
        check_entry_id(entry_id)
        check_leaf_id(leaf_id)
        return any(entry.id == entry_id for entry in await self.entries(session_id, leaf_id))

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The folded observational-memory ledger of the branch.

        The ledger of every leaf asked for is kept, and a later leaf's ledger extends the
        one of its nearest remembered ancestor instead of folding the branch again.
        """
        branch = await self.entries(session_id, check_leaf_id(leaf_id))
        if not branch:
            return fold_ledger(branch)
        cache = self._ledger_cache
        start, base = 0, None
        for index in range(len(branch) - 1, -1, -1):
            base = cache.get(branch[index].id)
            if base is not None:
                start = index + 1
                break
        if base is None:
            ledger = fold_ledger(branch)
        else:
            ledger = extend_observational_memory_ledger(
                base,
                branch[start:],
                first_position=start,
                source_time=branch_source_times(branch),
            )
        remember_ledger(cache, branch[-1].id, ledger)
        return ledger

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger without dropped observations and superseded reflections
        (see ``core.ledger_views.live_ledger``)."""
        return live_ledger(await self.ledger(session_id, leaf_id))

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger restricted to ``memory_ids`` (no coverage cursors)."""
        wanted = set(check_id_list(memory_ids, "memory_ids", memory=True))
        return restrict_ledger(await self.ledger(session_id, check_leaf_id(leaf_id)), wanted)

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap:
        """The folded work-scope map of the branch."""
        return fold_work_scope_map(await self.entries(session_id, check_leaf_id(leaf_id)))

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The branch's last ``count`` eligible messages, oldest first."""
        count = check_count(count)
        return last_eligible_messages(await self.entries(session_id, check_leaf_id(leaf_id)), count)

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """Branch entries strictly after ``after_id``; EntryNotFoundError if it is off it."""
        check_leaf_id(after_id, "after_id")
        branch = await self.entries(session_id, check_leaf_id(leaf_id))
        try:
            return entries_after_cursor(branch, after_id)
        except EntryNotFoundError as exc:
            exc.add_context(session_id=session_id, url=self.url)
            raise

    async def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """Eligible messages after/before ``cursor`` on the branch (see page_around_cursor)."""
        check_entry_id(cursor, "cursor")
        check_page_args(limit, direction)
        branch = await self.entries(session_id, check_leaf_id(leaf_id))
        try:
            return page_around_cursor(branch, cursor, limit, direction)
        except (EntryNotFoundError, InvalidInputError) as exc:
            exc.add_context(session_id=session_id, url=self.url)
            raise

    async def page_message_parts(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[MessagePart], bool]:
        """``page_messages``' page as message parts."""
        page, more = await self.page_messages(session_id, cursor, limit, direction, leaf_id)
        return [(e.id, e.timestamp, e.message) for e in page if e.message is not None], more

    async def memory_with_sources(
        self, session_id: str, memory_id: str
    ) -> tuple[ObservationalMemoryLedger, dict[str, SessionEntry]]:
        """``memory_subset`` of the id, then ``get_many`` of what it cites (see
        ``read_memory_with_sources``)."""
        return await read_memory_with_sources(self, session_id, memory_id)

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        """Number of entries on the branch."""
        return len(await self.entries(session_id, check_leaf_id(leaf_id)))

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int:
        """Estimated tokens of the branch's message entries.

        Each entry is counted once per encoding and remembered, so a per-turn call costs a
        sum over the branch, not a re-encoding of it.
        """
        estimator = get_estimator()
        cache = self._token_cache.setdefault(estimator.name, {})
        total = 0
        for entry in await self.entries(session_id, check_leaf_id(leaf_id)):
            if entry.kind != "message":
                continue
            count = cache.get(entry.id)
            if count is None:
                count = cache[entry.id] = estimator.count_entry(entry)
            total += count
        return total

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The latest compaction entry on the branch, or None."""
        branch = await self.entries(session_id, check_leaf_id(leaf_id))
        return next((e for e in reversed(branch) if e.kind == "compaction"), None)

    async def marked_data(
        self, session_id: str, custom_type: str, leaf_id: str | None = None
    ) -> builtins.list[MarkedData]:
        """The data of the branch's entries marked ``custom_type``, as copies."""
        check_custom_type(custom_type)
        branch = await self.entries(session_id, check_leaf_id(leaf_id))
        # A JSON round trip copies plain data faster than copy.deepcopy; to_wire is fresh.
        return [
            MarkedData(_copy_data(e.data), None if e.message is None else e.message.to_wire())
            for e in branch
            if e.custom_type == custom_type
        ]

    async def search(
        self,
        session_id: str,
        query: str,
        *,
        limit: int = 10,
        kinds: Iterable[SearchKind] | None = None,
        leaf_id: str | None = None,
        include_inactive: bool = False,
        invalidated_ids: Iterable[str] | None = None,
        secrets: Iterable[str] | Redactor | None = None,
    ) -> builtins.list[SearchHit]:
        """Search from ``entries()``: each eligible message's keys are computed once and
        kept (an entry's text never changes), the memory from the ledger."""
        validate_session_id(session_id, field="session_id")
        leaf_id = check_leaf_id(leaf_id)
        q = check_search(
            query,
            limit=limit,
            kinds=kinds,
            include_inactive=include_inactive,
            invalidated_ids=invalidated_ids,
            secrets=secrets,
        )

        async def messages(leaf: str, keys: frozenset[int]) -> builtins.list[MessageCandidate]:
            branch = await self.entries(session_id, leaf)
            return scan_message_candidates(
                branch, keys, self._search_keys, _SEARCH_KEYS_CACHE_SIZE, q.redactor
            )

        async def memory(leaf: str, keys: frozenset[int]) -> builtins.set[str] | None:
            return None  # every memory item of the ledger, tested by its own keys

        return await run_search(self, session_id, leaf_id, q, messages, memory)

    async def damaged_sessions(self) -> dict[str, StoreError]:
        """None found: a store without sessions apart has nothing to report here."""
        self._check_open()
        return {}

    async def erasure_report(self) -> ErasureReport:
        """Nothing left: the store erases a deleted session itself."""
        return ErasureReport()

    async def snapshot(
        self,
        session_id: str,
        *,
        recent: int = 8,
        leaf_id: str | None = None,
        full: bool = False,
    ) -> BranchSnapshot:
        """The branch's memory state at one leaf, from this store's own reads
        (``stores.snapshot.read_branch_snapshot``)."""
        return await read_branch_snapshot(
            self, session_id, recent, leaf_id, full, get_estimator().name
        )


@dataclass(frozen=True)
class SessionSummary:
    """What ``sessions`` lists for one session, kept by the store as it appends.

    ``entries`` counts every entry of the session (all branches), ``messages`` its
    message entries, ``leaves`` its entries without a child; ``last_activity`` is the
    greatest entry timestamp compared as a time, or None for a session without entries:
    ``max(utc_timestamp(e.timestamp) for e in entries)`` with
    ``prism_om.core.timestamps.utc_timestamp`` (the greatest raw string is not the
    latest time). The conformance suite compares ``utc_timestamp(last_activity)``.
    """

    session_id: str
    entries: int
    messages: int
    leaves: int
    last_activity: str | None
