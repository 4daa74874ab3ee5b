"""The ``SessionStore`` protocol every adapter implements, and the rules they share."""

from __future__ import annotations

import builtins
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Final, Literal, Protocol, Self, runtime_checkable

from ..core.limits import MAX_ENTRY_BYTES, resolve_page_limit
from ..core.validation import check_memory_record_caps
from ..entries import SessionEntry, check_entry_size, find_lone_surrogate, validate_session_id
from ..errors import (
    DuplicateEntryError,
    InvalidEntryError,
    InvalidInputError,
    SessionMismatchError,
    StaleCoverageError,
)

if TYPE_CHECKING:
    from ..core.ledger import ObservationalMemoryLedger
    from ..core.scope_map import WorkScopeMap

__all__ = [
    "ANY_MEMORY_HEAD",
    "AnyMemoryHead",
    "SessionStore",
    "SessionSummary",
    "chain_at_leaf",
    "check_batch_shape",
    "check_memory_head",
    "check_page_args",
]


class AnyMemoryHead(enum.Enum):
    """The type of ``ANY_MEMORY_HEAD``."""

    ANY = "any"


ANY_MEMORY_HEAD: Final = AnyMemoryHead.ANY
"""``append_at_leaf(expected_memory_head=...)`` default: append whatever the head is."""


@runtime_checkable
class SessionStore(Protocol):
    """An append-only forest of session entry trees.

    Rules every adapter keeps:

    * entry ids are unique across the whole store;
    * a parent exists in the same session; a session has exactly one root
      (``parent_id=None``);
    * appending to an entry that already has a child starts a new branch;
    * a rejected append or batch writes nothing; a batch belongs to one session;
    * each session has a persisted current leaf: an append moves it to the new entry,
      ``set_leaf`` moves it anywhere in the session (so the next append forks);
    * ``append``/``append_many`` place entries under the parents they name (two writers
      naming one parent fork the tree); ``append_at_leaf`` places a batch at the leaf it
      resolves inside the store's write lock, so concurrent writers chain one after
      another, in-process and across processes;
    * ``page_messages`` checks ``limit`` (an int, 1 to 100) and ``direction`` before it
      reads, with the errors of the public page functions.

    Cancellation: a write call that has begun runs to its end, even when the calling
    task is cancelled, and only then re-raises ``CancelledError``. "Its end" is the
    write stored whole, or rejected with nothing stored: a cancelled ``append_many`` /
    ``append_at_leaf`` batch is in the store entirely or not at all, and a cancelled
    call never leaves a transaction, lock or half-written line behind for the next
    writer (in this process or another). A call cancelled before it starts running
    writes nothing. ``set_leaf`` follows the same rule.
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
        records and plain compactions are not. Any new memory record moves the head, so
        it stands for the branch's whole memory coverage.
        """

    async def get(self, entry_id: str) -> SessionEntry | None:
        """The entry with this id, from any session, or None."""

    async def get_many(self, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist, by id (missing ids are left out)."""

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        """Every entry of the session in append order (empty for an unknown session)."""

    async def branch(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The path from the root to ``leaf_id`` (default: the current leaf), root first."""

    async def leaves(self, session_id: str) -> builtins.list[str]:
        """Ids of the session's entries that have no child, in append order."""

    async def leaf(self, session_id: str) -> str | None:
        """The session's persisted current leaf, or None for an unknown session."""

    async def set_leaf(self, session_id: str, entry_id: str) -> None:
        """Move the session's current leaf to one of its entries."""

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        """True when ``entry_id`` lies on the path from the root to the leaf."""

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's folded observational-memory ledger.

        Equal to ``fold_observational_memory_ledger(await self.branch(...))``; an indexed
        store answers it from fold tables, at a cost that follows the memory, not the
        transcript.
        """

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger less its dropped observations (and its drop list).

        Gives the same active memory as ``ledger()`` when nothing is invalidated; the
        per-turn context reads it, so a turn costs the live memory, not all ever recorded.
        """

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger restricted to ``memory_ids``: their observations,
        reflections and drops, without coverage cursors. Exact-id recall reads this."""

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

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        """Number of entries on the branch (its length, root included)."""

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int:
        """Estimated tokens of the branch's message entries (counted once, at append)."""

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The latest compaction entry on the branch, or None."""

    async def sessions(self) -> builtins.list[str]:
        """Every session id of the store, in order of creation."""

    async def close(self) -> None:
        """Release files and connections; idempotent."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


def check_batch_shape(entries: Iterable[SessionEntry]) -> builtins.list[SessionEntry]:
    """Checks that need no store: entry types, one session, no id twice in the batch, and
    each entry's serialised size within ``MAX_ENTRY_BYTES`` (``EntryTooLargeError``), and
    the per-record id caps (``MemoryRecordTooLargeError``). These are append rules: a
    store loading what it holds does not re-apply them."""
    batch = builtins.list(entries)
    if not batch:
        return batch
    seen: set[str] = set()
    session_id = None
    for entry in batch:
        if not isinstance(entry, SessionEntry):
            raise InvalidEntryError(
                f"expected a SessionEntry, got {type(entry).__name__}; "
                "build one with SessionEntry.model_validate(wire)"
            )
        if session_id is None:
            # The others must equal it, so one check covers the batch.
            session_id = validate_session_id(entry.session_id)
        elif entry.session_id != session_id:
            raise SessionMismatchError(
                f"entry {entry.id!r} belongs to session {entry.session_id!r}, but the batch "
                f"is for session {session_id!r}: a batch holds one session's entries"
            )
        if entry.id in seen:
            raise DuplicateEntryError(f"entry id {entry.id!r} appears twice in the batch")
        seen.add(entry.id)
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
                "UTF-16 pair); entry text must be valid Unicode"
            )
    return batch


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


def check_memory_head(
    session_id: str, expected: str | AnyMemoryHead | None, actual: str | None
) -> None:
    """Raise ``StaleCoverageError`` when the branch's memory head moved past ``expected``."""
    if expected is ANY_MEMORY_HEAD or expected == actual:
        return
    raise StaleCoverageError(
        f"session {session_id!r}: memory coverage moved (head {actual!r}, expected "
        f"{expected!r}); another worker recorded first, so this run's records were not stored"
    )


def check_page_args(limit: object, direction: object) -> None:
    """The page checks of ``page_messages``: the same errors as the public page functions."""
    if limit is None:
        raise InvalidInputError("limit must be a positive integer, got None")
    resolve_page_limit(limit)  # type: ignore[arg-type]  # it checks the type itself
    if direction not in ("forward", "backward"):
        raise InvalidInputError(f"direction must be 'forward' or 'backward', got {direction!r}")


@dataclass(frozen=True)
class SessionSummary:
    """What ``sessions`` lists for one session, kept by the store as it appends.

    ``entries`` counts every entry of the session (all branches), ``messages`` its
    message entries, ``leaves`` its entries without a child; ``last_activity`` is the
    greatest entry timestamp, or None for a session without entries.
    """

    session_id: str
    entries: int
    messages: int
    leaves: int
    last_activity: str | None
