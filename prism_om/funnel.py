"""Cross-session recall by funnel: copy child messages onto a workspace session.

The specification's opt-in pattern for delegation trees: a store wrapper that, after a
child session's eligible message lands, appends a copy with a NEW entry id onto the
workspace (parent) session, so the parent's observational memory observes it and mints
its own ids. ``om.*`` records and other bookkeeping are never copied (their source ids
would dangle), copies are appended at the workspace leaf inside the store's write lock so
neither concurrent children nor the workspace's own writers fork its branch, and the
workspace session resumes from the store's persisted leaf.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from .core.sources import is_eligible_observation_source_entry
from .entries import SessionEntry, validate_session_id
from .ids import create_entry_id
from .stores.base import SessionStore

__all__ = ["FunnelStore", "funnel_child_messages_to_workspace"]


class FunnelStore:
    """A ``SessionStore`` that copies eligible child messages onto a workspace session.

    Every other call goes to the wrapped store unchanged.
    """

    def __init__(self, store: SessionStore, workspace_session_id: str) -> None:
        self.inner = store
        self.workspace_session_id = validate_session_id(workspace_session_id)
        self.url = store.url
        # One copy at a time: the workspace tip read and the append must not interleave.
        self._lock = asyncio.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def append(self, entry: SessionEntry) -> None:
        await self.inner.append(entry)
        await self._copy([entry])

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        await self.inner.append_many(entries)
        await self._copy(entries)

    async def append_at_leaf(
        self, entries: Sequence[SessionEntry], **options: Any
    ) -> list[SessionEntry]:
        # Session.append* lands here: copy what was stored, with the parents it got.
        stored = await self.inner.append_at_leaf(entries, **options)
        await self._copy(stored)
        return stored

    async def _copy(self, entries: Sequence[SessionEntry]) -> None:
        wanted = [
            e
            for e in entries
            if e.session_id != self.workspace_session_id and is_eligible_observation_source_entry(e)
        ]
        if not wanted:
            return
        async with self._lock:
            copies = [
                entry.model_copy(
                    update={"id": create_entry_id("w"), "session_id": self.workspace_session_id}
                )
                for entry in wanted
            ]
            # Chained at the workspace leaf inside the store's write lock, so the
            # workspace's own writers (other tasks, other processes) never fork it.
            await self.inner.append_at_leaf(copies)

    async def __aenter__(self) -> FunnelStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.close()


def funnel_child_messages_to_workspace(
    store: SessionStore, workspace_session_id: str
) -> FunnelStore:
    """Wrap ``store`` so eligible child messages are copied onto the workspace session."""
    return FunnelStore(store, workspace_session_id)
