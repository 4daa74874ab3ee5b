"""Memory reads derived from ``branch()`` with the pure reference functions.

The in-memory and JSONL adapters answer the memory queries this way; the SQLite adapter
answers the same questions from its fold tables and indexes, and the conformance suite
checks that both give identical results.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Literal, Protocol

from ..entries import SessionEntry
from ..errors import EntryNotFoundError, InvalidInputError
from ..observational_memory.ledger import (
    ObservationalMemoryLedger,
    fold_observational_memory_ledger,
)
from ..observational_memory.scope_map import WorkScopeMap, fold_work_scope_map
from ..observational_memory.sources import is_eligible_observation_source_entry

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "BranchDerivedReads",
    "entries_after_cursor",
    "last_eligible_messages",
    "page_around_cursor",
]


def last_eligible_messages(branch: Sequence[SessionEntry], count: int) -> list[SessionEntry]:
    """The last ``count`` user/assistant/tool messages of a branch, oldest first."""
    chosen: list[SessionEntry] = []
    for entry in reversed(branch):
        if len(chosen) >= count:
            break
        if is_eligible_observation_source_entry(entry):
            chosen.append(entry)
    chosen.reverse()
    return chosen


def entries_after_cursor(
    branch: Sequence[SessionEntry], after_id: str | None
) -> list[SessionEntry]:
    """Entries of a branch strictly after ``after_id`` (all of them when None)."""
    if after_id is None:
        return list(branch)
    for index, entry in enumerate(branch):
        if entry.id == after_id:
            return list(branch[index + 1 :])
    raise EntryNotFoundError(f"entry {after_id!r} is not on the branch")


def page_around_cursor(
    branch: Sequence[SessionEntry],
    cursor: str,
    limit: int,
    direction: Literal["forward", "backward"],
) -> tuple[list[SessionEntry], bool]:
    """Up to ``limit`` eligible messages after (or before) ``cursor``, oldest first.

    Returns the messages and whether more lie beyond them. The cursor must be a user,
    assistant or tool message of the branch.
    """
    position = next((i for i, e in enumerate(branch) if e.id == cursor), None)
    if position is None:
        raise EntryNotFoundError(f"cursor {cursor!r} is not an entry of the current branch")
    if not is_eligible_observation_source_entry(branch[position]):
        raise InvalidInputError(
            f"cursor {cursor!r} is a {branch[position].kind} entry, not a user, assistant "
            "or tool message"
        )
    if direction == "forward":
        pool = [e for e in branch[position + 1 :] if is_eligible_observation_source_entry(e)]
        return pool[:limit], len(pool) > limit
    pool = [e for e in branch[:position] if is_eligible_observation_source_entry(e)]
    return pool[max(len(pool) - limit, 0) :], len(pool) > limit


class _HasBranch(Protocol):
    async def branch(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]: ...


class BranchDerivedReads:
    """Mixin: memory reads computed from ``self.branch`` (O(branch) each)."""

    async def ledger(
        self: _HasBranch, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The folded observational-memory ledger of the branch."""
        return fold_observational_memory_ledger(await self.branch(session_id, leaf_id))

    async def scope_map(
        self: _HasBranch, session_id: str, leaf_id: str | None = None
    ) -> WorkScopeMap:
        """The folded work-scope map of the branch."""
        return fold_work_scope_map(await self.branch(session_id, leaf_id))

    async def recent_messages(
        self: _HasBranch, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """The branch's last ``count`` eligible messages, oldest first."""
        return last_eligible_messages(await self.branch(session_id, leaf_id), count)

    async def entries_after(
        self: _HasBranch, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        """Branch entries strictly after ``after_id``; EntryNotFoundError if it is off it."""
        return entries_after_cursor(await self.branch(session_id, leaf_id), after_id)

    async def page_messages(
        self: _HasBranch,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        """Eligible messages after/before ``cursor`` on the branch (see page_around_cursor)."""
        return page_around_cursor(await self.branch(session_id, leaf_id), cursor, limit, direction)
