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

from ...core.ledger import LedgerBuilder, ObservationalMemoryLedger
from ...core.scope_map import WorkScopeMap, fold_work_scope_map
from ...entries import SessionEntry
from ...errors import EntryNotFoundError
from ...tokens import get_estimator
from ..arguments import check_count, check_entry_id, check_id_list, check_leaf_id
from ..base import StoreBase, check_page_args, remember_ledger
from .index import TreeIndex
from .lazy_entries import LazyEntries

__all__ = ["TreeIndexReads"]

_T = TypeVar("_T")
# A ledger read's walk: the remembered record, the records since, their depths and the
# path's source times.
_Since = tuple[
    str | None, builtins.list[SessionEntry], builtins.list[int], Callable[[str], str | None]
]


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
        check_entry_id(cursor, "cursor")
        check_page_args(limit, direction)
        check_leaf_id(leaf_id)

        def page(index: TreeIndex, sid: str) -> tuple[builtins.list[SessionEntry], bool]:
            return index.page_messages(sid, cursor, limit, direction, leaf_id)

        return await self._tree_query(session_id, page)

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        count = check_count(count)
        check_leaf_id(leaf_id)
        return await self._tree_query(
            session_id, lambda index, sid: index.recent_messages(sid, count, leaf_id)
        )

    async def memory_subset(
        self, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        wanted = check_id_list(memory_ids, "memory_ids", memory=True)
        check_leaf_id(leaf_id)
        return await self._tree_query(
            session_id, lambda index, sid: index.memory_subset(sid, wanted, leaf_id)
        )

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """``StoreBase.ledger``, folded from the path's memory records alone.

        Only those records change a fold, so the ledger of a leaf is the ledger of its
        memory head, and the cache is kept by record id: a read folds the records since
        the nearest remembered one, and never reads a message (a JSONL reopen leaves
        message lines unparsed).
        """
        check_leaf_id(leaf_id)
        cache = self._ledger_cache

        def since(index: TreeIndex, sid: str) -> _Since:
            base_id, records = index.memory_records_since(sid, leaf_id, cache)
            depths = [index.depth[r.id] for r in records]
            return base_id, records, depths, index.source_time(sid, index.tip(sid, leaf_id))

        base_id, records, depths, source_time = await self._tree_query(session_id, since)
        base = None if base_id is None else cache.get(base_id)
        if not records:
            return base or ObservationalMemoryLedger()
        builder = LedgerBuilder(base, source_time=source_time)
        for record, depth in zip(records, depths, strict=True):
            builder.add(record, depth)
        ledger = builder.build()
        remember_ledger(cache, records[-1].id, ledger)
        return ledger

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """``StoreBase.live_ledger``, folded live from the path's memory records: the live
        view of the nearest remembered record, extended by the records since
        (``LedgerBuilder(live=True)``), so a new record costs the live memory, not every
        observation ever recorded (a dropped one is never looked at again)."""
        leaf_id = check_leaf_id(leaf_id)
        cache = self._live_cache

        def since(index: TreeIndex, sid: str) -> _Since:
            base_id, records = index.memory_records_since(sid, leaf_id, cache)
            depths = [index.depth[r.id] for r in records]
            return base_id, records, depths, index.source_time(sid, index.tip(sid, leaf_id))

        base_id, records, depths, source_time = await self._tree_query(session_id, since)
        base = None if base_id is None else cache.get(base_id)
        if not records:
            return base or ObservationalMemoryLedger()
        builder = LedgerBuilder(base, source_time=source_time, live=True)
        for record, depth in zip(records, depths, strict=True):
            builder.add(record, depth)
        live = builder.build()
        remember_ledger(cache, records[-1].id, live)
        return live

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap:
        """The path's scope map, folded from its indexed om.scope.* records only."""
        check_leaf_id(leaf_id)
        return fold_work_scope_map(
            await self._tree_query(session_id, lambda index, sid: index.scope_entries(sid, leaf_id))
        )

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]:
        check_leaf_id(after_id, "after_id")
        check_leaf_id(leaf_id)
        found = await self._tree_query(
            session_id, lambda index, sid: index.entries_after(sid, after_id, leaf_id)
        )
        if found is None:
            raise EntryNotFoundError(
                f"entry {after_id!r} is not on the branch",
                entry_id=after_id,
                session_id=session_id,
                url=self.url,
            )
        return found

    async def last_compaction(
        self, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The path's latest compaction, walking its ids back: a message the index holds
        only as a place in a file is skipped unread (compactions stay parsed)."""
        check_leaf_id(leaf_id)

        def latest(index: TreeIndex, sid: str) -> SessionEntry | None:
            entries = index.entries
            lazy = entries if isinstance(entries, LazyEntries) else None
            for entry_id in reversed(index.path_ids(sid, leaf_id)):
                if lazy is not None and lazy.is_located(entry_id):
                    continue  # a message
                entry = entries[entry_id]
                if entry.kind == "compaction":
                    return entry
            return None

        return await self._tree_query(session_id, latest)

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int:
        check_leaf_id(leaf_id)
        return await self._tree_query(
            session_id, lambda index, sid: index.entry_count(sid, leaf_id)
        )

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int:
        """``StoreBase.branch_tokens`` over the path's ids, reading only entries not yet
        counted with this encoding (a JSONL index sidecar may bring every count)."""
        check_leaf_id(leaf_id)
        estimator = get_estimator()
        counted = self._token_cache.setdefault(estimator.name, {})
        return await self._tree_query(
            session_id,
            lambda index, sid: index.message_tokens(sid, leaf_id, counted, estimator.count_entry),
        )
