"""The per-turn reads of the stores built on a ``TreeIndex`` (memory and JSONL).

``StoreBase`` derives every read from ``entries()``, so a page or a recall there costs the
whole branch. These answer the same questions from the index's path pieces: a page of 20
and a recall read O(forks on the path + answer) entries at any session length. The
conformance suite holds them to ``StoreBase``'s answers.
"""

from __future__ import annotations

import abc
import builtins
from collections.abc import Callable, Iterable
from typing import Literal, TypeVar

from ..core.ledger import ObservationalMemoryLedger
from ..entries import SessionEntry
from ._tree import TreeIndex
from .base import StoreBase, check_page_args

__all__ = ["TreeIndexReads"]

_T = TypeVar("_T")


class TreeIndexReads(StoreBase):
    """``StoreBase`` with the indexed reads; an adapter supplies ``_tree_query``."""

    @abc.abstractmethod
    async def _tree_query(self, session_id: str, query: Callable[[TreeIndex, str], _T]) -> _T:
        """Run ``query(index, session_id)`` on an index holding the session, current.

        Checks the store is open, then the session id (as ``entries`` does), first.
        """

    async def page_messages(
        self,
        session_id: str,
        cursor: str,
        limit: int,
        direction: Literal["forward", "backward"] = "forward",
        leaf_id: str | None = None,
    ) -> tuple[builtins.list[SessionEntry], bool]:
        check_page_args(limit, direction)

        def page(index: TreeIndex, sid: str) -> tuple[builtins.list[SessionEntry], bool]:
            return index.page_messages(sid, cursor, limit, direction, leaf_id)

        return await self._tree_query(session_id, page)

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        return await self._tree_query(
            session_id, lambda index, sid: index.recent_messages(sid, count, leaf_id)
        )

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        wanted = builtins.list(memory_ids)
        return await self._tree_query(
            session_id, lambda index, sid: index.memory_subset(sid, wanted, leaf_id)
        )

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        return await self._tree_query(
            session_id, lambda index, sid: index.entry_count(sid, leaf_id)
        )
