"""An adapter that implements only the tree operations, as an outside adapter would.

``TreeOnlyStore`` keeps its entries in a ``MemoryStore`` it wraps, forwards the
``SessionTree`` operations to it, and inherits every memory and branch read from
``StoreBase``. The conformance suites run over it, which proves that the base's derived
reads alone satisfy ``SessionStore``: copy this shape to write an adapter, then override
a read only when it can answer faster than a walk of ``entries()``.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence

from ..entries import SessionEntry
from ..stores.base import ANY_MEMORY_HEAD, AnyMemoryHead, SessionSummary, StoreBase
from ..stores.memory import MemoryStore
from .faults import inject_append_fault

__all__ = ["TreeOnlyStore"]


class TreeOnlyStore(StoreBase):
    """A ``StoreBase`` over a wrapped ``MemoryStore``'s tree; nothing survives ``close()``."""

    def __init__(self, url: str = "memory:tree-only") -> None:
        super().__init__()
        self.url = url
        self._tree = MemoryStore(url)

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        self._check_open()
        fault = self._append_fault
        if fault is None:
            await self._tree.append_many(entries)
            return
        # The wrapped store's commit point is this adapter's commit point.
        with inject_append_fault(self._tree, fault):
            await self._tree.append_many(entries)

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        self._check_open()
        fault = self._append_fault
        if fault is None:
            return await self._tree.append_at_leaf(
                entries, expected_memory_head=expected_memory_head
            )
        with inject_append_fault(self._tree, fault):
            return await self._tree.append_at_leaf(
                entries, expected_memory_head=expected_memory_head
            )

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        self._check_open()
        return await self._tree.memory_head(session_id, leaf_id)

    async def get(self, entry_id: str) -> SessionEntry | None:
        self._check_open()
        return await self._tree.get(entry_id)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        self._check_open()
        return await self._tree.list(session_id)

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        self._check_open()
        return await self._tree.entries(session_id, leaf_id)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        self._check_open()
        return await self._tree.leaves(session_id)

    async def leaf(self, session_id: str) -> str | None:
        self._check_open()
        return await self._tree.leaf(session_id)

    async def checkout(self, session_id: str, entry_id: str) -> None:
        self._check_open()
        await self._tree.checkout(session_id, entry_id)

    async def delete_session(self, session_id: str) -> int:
        self._check_open()
        count = await self._tree.delete_session(session_id)
        self._forget_cached()
        return count

    async def sessions(self) -> builtins.list[str]:
        self._check_open()
        return await self._tree.sessions()

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        self._check_open()
        return await self._tree.session_summaries()

    async def close(self) -> None:
        self._closed = True
        await self._tree.close()
