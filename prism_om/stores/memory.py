"""The in-memory adapter: the reference implementation the other adapters must equal."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable, Sequence
from typing import TypeVar

from ..entries import SessionEntry, validate_session_id
from ._shield import finish_then_cancel
from .arguments import check_entry_id, check_expected_memory_head, check_leaf_id
from .base import (
    ANY_MEMORY_HEAD,
    AnyMemoryHead,
    SessionSummary,
    chain_at_leaf,
    check_batch_shape,
    check_memory_head,
    session_not_found,
)
from .segment_index.index import TreeIndex
from .segment_index.reads import TreeIndexReads

__all__ = ["MemoryStore"]

_T = TypeVar("_T")


class MemoryStore(TreeIndexReads):
    """A store that lives in the process; nothing survives ``close()``."""

    def __init__(self, url: str = "memory:") -> None:
        super().__init__()
        self.url = url
        self._index = TreeIndex(url)
        # One writer at a time, so a batch's check and apply are never interleaved.
        self._lock = asyncio.Lock()

    def _open_index(self) -> TreeIndex:
        self._check_open()
        return self._index

    async def _tree_query(self, session_id: str, query: Callable[[TreeIndex, str], _T]) -> _T:
        index = self._open_index()
        return query(index, validate_session_id(session_id))

    async def append_many(self, entries: Sequence[SessionEntry]) -> None:
        batch = check_batch_shape(entries, url=self.url)
        self._open_index()
        if batch:
            await finish_then_cancel(self._append_locked(batch, None, ANY_MEMORY_HEAD))

    async def append_at_leaf(
        self,
        entries: Sequence[SessionEntry],
        *,
        expected_memory_head: str | AnyMemoryHead | None = ANY_MEMORY_HEAD,
    ) -> builtins.list[SessionEntry]:
        batch = check_batch_shape(entries, url=self.url)
        expected_memory_head = check_expected_memory_head(expected_memory_head)
        self._open_index()
        if not batch:
            return []
        stored = await finish_then_cancel(
            self._append_locked(batch, batch[0].session_id, expected_memory_head)
        )
        return stored

    async def _append_locked(
        self,
        batch: builtins.list[SessionEntry],
        at_leaf_of: str | None,
        expected_head: str | AnyMemoryHead | None,
    ) -> builtins.list[SessionEntry]:
        async with self._lock:
            index = self._open_index()
            if at_leaf_of is not None:
                leaf = index.leaf(at_leaf_of)
                batch = chain_at_leaf(batch, leaf)
                check_memory_head(
                    at_leaf_of, expected_head, None if leaf is None else index.memory_heads[leaf]
                )
            index.check(batch)
            self._append_fault_point(batch)
            index.apply(batch)
            return batch

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None:
        check_leaf_id(leaf_id)
        return self._open_index().memory_head(validate_session_id(session_id), leaf_id)

    async def get(self, entry_id: str) -> SessionEntry | None:
        return self._open_index().entries.get(check_entry_id(entry_id))

    async def list(self, session_id: str) -> builtins.list[SessionEntry]:
        return self._open_index().session_entries(validate_session_id(session_id))

    async def entries(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        check_leaf_id(leaf_id)
        return self._open_index().branch(validate_session_id(session_id), leaf_id)

    async def leaves(self, session_id: str) -> builtins.list[str]:
        return self._open_index().leaves(validate_session_id(session_id))

    async def leaf(self, session_id: str) -> str | None:
        return self._open_index().leaf(validate_session_id(session_id))

    async def checkout(self, session_id: str, entry_id: str) -> None:
        check_entry_id(entry_id)
        index = self._open_index()
        index.resolve_leaf(validate_session_id(session_id), entry_id)
        # No await between the check and the move: nothing to cancel half-way.
        index.trees[session_id].leaf = entry_id

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool:
        check_entry_id(entry_id)
        check_leaf_id(leaf_id)
        return self._open_index().is_on_branch(validate_session_id(session_id), entry_id, leaf_id)

    async def delete_session(self, session_id: str) -> int:
        sid = validate_session_id(session_id)
        self._open_index()
        return await finish_then_cancel(self._delete_locked(sid))

    async def _delete_locked(self, session_id: str) -> int:
        async with self._lock:
            index = self._open_index()
            tree = index.trees.get(session_id)
            if tree is None or not tree.order:
                raise session_not_found(session_id, self.url)
            count = len(tree.order)
            index.drop_session(session_id)
            self._forget_cached()
            return count

    async def sessions(self) -> builtins.list[str]:
        return builtins.list(self._open_index().trees)

    async def session_summaries(self) -> builtins.list[SessionSummary]:
        """Each session's counts, in order of creation."""
        index = self._open_index()
        return [index.summary(sid) for sid in index.trees]

    async def close(self) -> None:
        self._closed = True
