"""The in-memory adapter: the reference implementation the other adapters must equal."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from types import TracebackType
from typing import Self

from ..entries import SessionEntry, validate_session_id
from ..errors import StoreClosedError
from ._derived import BranchDerivedReads
from ._tree import TreeIndex
from .base import SessionSummary, check_batch_shape

__all__ = ["MemoryStore"]


class MemoryStore(BranchDerivedReads):
    """A store that lives in the process; nothing survives ``close()``."""

    def __init__(self, url: str = "memory:") -> None:
        self.url = url
        self._index = TreeIndex()
        self._closed = False
        # One writer at a time, so a batch's check and apply are never interleaved.
        self._lock = asyncio.Lock()

    def _open_index(self) -> TreeIndex:
        if self._closed:
            raise StoreClosedError(f"store {self.url!r} is closed")
        return self._index

    async def append(self, entry: SessionEntry) -> None:
        await self.append_many([entry])

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries)
        async with self._lock:
            index = self._open_index()
            index.check(batch)
            index.apply(batch)

    async def get(self, entry_id: str) -> SessionEntry | None:
        return self._open_index().entries.get(entry_id)

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        return self._open_index().session_entries(validate_session_id(session_id))

    async def branch(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        return self._open_index().branch(validate_session_id(session_id), leaf_id)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        return self._open_index().leaves(validate_session_id(session_id))

    async def leaf(self, session_id: str) -> str | None:
        return self._open_index().leaf(validate_session_id(session_id))

    async def set_leaf(self, session_id: str, entry_id: str) -> None:
        index = self._open_index()
        index.resolve_leaf(validate_session_id(session_id), entry_id)
        index.trees[session_id].leaf = entry_id

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        return self._open_index().is_on_branch(validate_session_id(session_id), entry_id, leaf_id)

    async def sessions(self) -> builtins.list[str]:
        return builtins.list(self._open_index().trees)

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        """Each session's counts, in order of creation."""
        index = self._open_index()
        return [index.summary(sid) for sid in index.trees]

    async def close(self) -> None:
        self._closed = True

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
