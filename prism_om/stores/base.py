"""The ``SessionStore`` protocol every adapter implements, and the rules they share."""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Literal, Protocol, Self, runtime_checkable

from ..entries import SessionEntry, validate_session_id
from ..errors import DuplicateEntryError, InvalidEntryError, SessionMismatchError

if TYPE_CHECKING:
    from ..observational_memory.ledger import ObservationalMemoryLedger
    from ..observational_memory.scope_map import WorkScopeMap

__all__ = ["SessionStore", "SessionSummary", "check_batch_shape"]


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
      ``set_leaf`` moves it anywhere in the session (so the next append forks).
    """

    url: str

    async def append(self, entry: SessionEntry) -> None:
        """Append one entry."""

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        """Append a batch of one session's entries, all or nothing."""

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
        is off the branch; ``InvalidInputError`` when it is not an eligible message.
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
    """Checks that need no store: entry types, one session, no id twice in the batch."""
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
    return batch


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
