"""Pure reads over one branch: its last messages, what follows a cursor, a page.

The in-memory and JSONL stores answer their memory queries with these over ``entries()``;
the SQLite store answers the same questions with indexed queries, and the conformance
suite holds the two to identical results.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from ..entries import SessionEntry
from ..errors import EntryNotFoundError, InvalidInputError
from .sources import is_eligible_observation_source_entry

__all__ = ["entries_after_cursor", "last_eligible_messages"]


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
    raise EntryNotFoundError(f"entry {after_id!r} is not on the branch", entry_id=after_id)


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
        raise EntryNotFoundError(
            f"cursor {cursor!r} is not an entry of the current branch", entry_id=cursor
        )
    if not is_eligible_observation_source_entry(branch[position]):
        raise InvalidInputError(
            f"cursor {cursor!r} is a {branch[position].kind} entry, not a user, assistant "
            "or tool message",
            entry_id=cursor,
        )
    if direction == "forward":
        pool = [e for e in branch[position + 1 :] if is_eligible_observation_source_entry(e)]
        return pool[:limit], len(pool) > limit
    pool = [e for e in branch[:position] if is_eligible_observation_source_entry(e)]
    return pool[max(len(pool) - limit, 0) :], len(pool) > limit
