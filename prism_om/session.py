"""``Session``: one session id bound to a store, with its persisted current leaf."""

from __future__ import annotations

from collections.abc import Callable
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
from .stores.base import ANY_MEMORY_HEAD, AnyMemoryHead, SessionStore

__all__ = ["Session", "same_content", "stored_on_branch"]


class Session:
    """A view of one session of a store.

    The current leaf is the store's persisted leaf, so two ``Session`` objects over the
    same store and id agree, and a reopened store resumes where the session was. Every
    ``append*`` here appends at the current leaf as the store resolves it inside its
    write lock (``SessionStore.append_at_leaf``), so concurrent writers (two tasks, an
    agent turn and background memory work, two processes) chain one after another
    instead of forking or failing. An explicit ``parent_id=`` keeps the store's plain
    rules instead: the entry goes under that parent, and a parent that already has a
    child forks.
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
        return await self.store.entries(self.id)

    async def append(
        self,
        entry: SessionEntry,
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> SessionEntry:
        """Append a ready entry of this session at the current leaf; returns it as stored.

        The entry's own ``parent_id`` is replaced by the leaf resolved inside the store's
        write lock (use ``store.append(entry)`` to keep it). ``expected_memory_head``: see
        ``SessionStore.append_at_leaf``.
        """
        if entry.session_id != self.id:
            raise SessionMismatchError(
                f"entry {entry.id!r} belongs to session {entry.session_id!r}, not {self.id!r}"
            )
        stored = await self.store.append_at_leaf([entry], expected_memory_head=expected_memory_head)
        return stored[0]

    async def append_message(
        self, role: Role, content: str | list[Any], **fields: Any
    ) -> SessionEntry:
        """Append a message at the current leaf (or under an explicit ``parent_id``)."""
        return await self._place(message_entry, role, content, **fields)

    async def append_custom(self, data: dict[str, Any], **fields: Any) -> SessionEntry:
        """Append a custom entry (``data`` carries its ``type`` marker) at the current leaf."""
        return await self._place(custom_entry, data, **fields)

    async def append_compaction(
        self, summary: str, data: dict[str, Any] | None = None, **fields: Any
    ) -> SessionEntry:
        """Append a compaction entry at the current leaf."""
        return await self._place(compaction_entry, summary, data, **fields)

    async def _place(
        self, build: Callable[..., SessionEntry], *args: Any, **fields: Any
    ) -> SessionEntry:
        if "parent_id" in fields:
            entry = build(self.id, *args, **fields)
            await self.store.append(entry)
            return entry
        # The parent is a placeholder: append_at_leaf puts the entry under the leaf.
        return await self.append(build(self.id, *args, parent_id=None, **fields))

    async def checkout(self, entry_id: str) -> None:
        """Move the current leaf back to ``entry_id``; the next append forks from there."""
        await self.store.checkout(self.id, entry_id)


async def stored_on_branch(store: SessionStore, entry: SessionEntry) -> SessionEntry | None:
    """The stored copy of ``entry`` when it lies on its session's current branch with the
    content it was given, else None.

    The check a memory writer makes after appending through a host callback: an entry
    that landed in another session, branch or store fails it. The parent is left out of
    the comparison, because an append at the leaf chooses it (after later entries from
    other writers, which must not be undone).
    """
    stored = await store.get(entry.id)
    if (
        stored is None
        or not same_content(stored, entry)
        or not await store.is_on_branch(entry.session_id, entry.id)
    ):
        return None
    return stored


def same_content(stored: SessionEntry, entry: SessionEntry) -> bool:
    """Whether ``stored`` is ``entry`` as given (same id, session and content), wherever the
    append placed it (the parent is left out: an append at the leaf chooses it)."""
    return stored.session_id == entry.session_id and _content(stored) == _content(entry)


def _content(entry: SessionEntry) -> dict[str, Any]:
    wire = entry.to_wire()
    wire.pop("parentId", None)
    return wire
