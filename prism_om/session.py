"""``Session``: one session id bound to a store, with its persisted current leaf."""

from __future__ import annotations

from typing import Any

from .entries import (
    Role,
    SessionEntry,
    compaction_entry,
    custom_entry,
    message_entry,
    validate_session_id,
)
from .errors import SessionMismatchError
from .stores.base import SessionStore

__all__ = ["Session"]


class Session:
    """A view of one session of a store.

    The current leaf is the store's persisted leaf, so two ``Session`` objects over the
    same store and id agree, and a reopened store resumes where the session was. An entry
    built here names the current leaf as its parent; two writers that both name the same
    parent fork the tree rather than lose an entry.
    """

    def __init__(self, store: SessionStore, session_id: str) -> None:
        self.store = store
        self.id = validate_session_id(session_id)

    def __repr__(self) -> str:
        return f"Session({self.id!r}, store={self.store.url!r})"

    async def leaf(self) -> str | None:
        """The id of the current leaf, or None for a session with no entries yet."""
        return await self.store.leaf(self.id)

    async def entries(self) -> list[SessionEntry]:
        """The current branch, root first."""
        return await self.store.branch(self.id)

    async def append(self, entry: SessionEntry) -> SessionEntry:
        """Append a ready entry of this session; the store moves the leaf to it."""
        if entry.session_id != self.id:
            raise SessionMismatchError(
                f"entry {entry.id!r} belongs to session {entry.session_id!r}, not {self.id!r}"
            )
        await self.store.append(entry)
        return entry

    async def append_message(
        self, role: Role, content: str | list[Any], **fields: Any
    ) -> SessionEntry:
        """Append a message whose parent is the current leaf."""
        entry = message_entry(self.id, role, content, parent_id=await self.leaf(), **fields)
        return await self.append(entry)

    async def append_custom(self, data: dict[str, Any], **fields: Any) -> SessionEntry:
        """Append a custom entry (``data`` carries its ``type`` marker) at the current leaf."""
        entry = custom_entry(self.id, data, parent_id=await self.leaf(), **fields)
        return await self.append(entry)

    async def append_compaction(
        self, summary: str, data: dict[str, Any] | None = None, **fields: Any
    ) -> SessionEntry:
        """Append a compaction entry at the current leaf."""
        entry = compaction_entry(self.id, summary, data, parent_id=await self.leaf(), **fields)
        return await self.append(entry)

    async def checkout(self, entry_id: str) -> None:
        """Move the current leaf back to ``entry_id``; the next append forks from there."""
        await self.store.set_leaf(self.id, entry_id)
