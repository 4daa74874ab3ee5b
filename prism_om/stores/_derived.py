"""Memory reads derived from ``branch()`` with the pure reference functions.

The in-memory and JSONL adapters answer the memory queries this way; the SQLite adapter
answers the same questions from its fold tables and indexes, and the conformance suite
checks that both give identical results.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable
from typing import Literal, Protocol

from ..core.branch_reads import entries_after_cursor, last_eligible_messages, page_around_cursor
from ..core.ledger import (
    ObservationalMemoryLedger,
    branch_source_times,
    extend_observational_memory_ledger,
    fold_ledger,
)
from ..core.ledger_views import live_ledger, restrict_ledger
from ..core.scope_map import WorkScopeMap, fold_work_scope_map
from ..entries import SessionEntry
from ..tokens import get_estimator
from .base import check_page_args

__all__ = ["BranchDerivedReads"]


# Ledgers remembered per adapter instance, by leaf id (oldest evicted first).
_LEDGER_CACHE_SIZE = 64


class _HasBranch(Protocol):
    async def branch(
        self, session_id: str, leaf_id: str | None = None
    ) -> builtins.list[SessionEntry]: ...


class _HasGet(Protocol):
    async def get(self, entry_id: str) -> SessionEntry | None: ...


class BranchDerivedReads:
    """Mixin: memory reads computed from ``self.branch`` (O(branch) each)."""

    async def ledger(
        self: _HasBranch, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The folded observational-memory ledger of the branch.

        A branch never changes once its leaf exists (entries are append-only), so the
        ledger of every leaf asked for is kept, and a later leaf's ledger extends the one
        of its nearest remembered ancestor instead of folding the branch again.
        """
        branch = await self.branch(session_id, leaf_id)
        if not branch:
            return fold_ledger(branch)
        cache: dict[str, ObservationalMemoryLedger] = self.__dict__.setdefault("_ledger_cache", {})
        start, base = 0, None
        for index in range(len(branch) - 1, -1, -1):
            base = cache.get(branch[index].id)
            if base is not None:
                start = index + 1
                break
        if base is None:
            ledger = fold_ledger(branch)
        else:
            ledger = extend_observational_memory_ledger(
                base,
                branch[start:],
                first_position=start,
                source_time=branch_source_times(branch),
            )
        if len(cache) >= _LEDGER_CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[branch[-1].id] = ledger
        return ledger

    async def get_many(self: _HasGet, entry_ids: Iterable[str]) -> dict[str, SessionEntry]:
        """The entries with these ids that exist."""
        found: dict[str, SessionEntry] = {}
        for entry_id in dict.fromkeys(entry_ids):
            entry = await self.get(entry_id)
            if entry is not None:
                found[entry_id] = entry
        return found

    async def live_ledger(
        self: _HasBranch, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The ledger without its dropped observations (see ``core.ledger_views.live_ledger``)."""
        return live_ledger(await BranchDerivedReads.ledger(self, session_id, leaf_id))

    async def memory_subset(
        self: _HasBranch, session_id: str, memory_ids: Iterable[str], leaf_id: str | None = None
    ) -> ObservationalMemoryLedger:
        """The branch's ledger restricted to ``memory_ids`` (no coverage cursors)."""
        wanted = set(memory_ids)
        ledger = await BranchDerivedReads.ledger(self, session_id, leaf_id)
        return restrict_ledger(ledger, wanted)

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
        check_page_args(limit, direction)
        return page_around_cursor(await self.branch(session_id, leaf_id), cursor, limit, direction)

    async def entry_count(self: _HasBranch, session_id: str, leaf_id: str | None = None) -> int:
        """Number of entries on the branch."""
        return len(await self.branch(session_id, leaf_id))

    async def branch_tokens(self: _HasBranch, session_id: str, leaf_id: str | None = None) -> int:
        """Estimated tokens of the branch's message entries.

        Each entry is counted once per encoding and remembered (entries never change), so
        a per-turn call costs a sum over the branch, not a re-encoding of it.
        """
        estimator = get_estimator()
        cache: dict[str, int] = self.__dict__.setdefault(f"_tokens:{estimator.name}", {})
        total = 0
        for entry in await self.branch(session_id, leaf_id):
            if entry.kind != "message":
                continue
            count = cache.get(entry.id)
            if count is None:
                count = cache[entry.id] = estimator.count_entry(entry)
            total += count
        return total

    async def last_compaction(
        self: _HasBranch, session_id: str, leaf_id: str | None = None
    ) -> SessionEntry | None:
        """The latest compaction entry on the branch, or None."""
        branch = await self.branch(session_id, leaf_id)
        return next((e for e in reversed(branch) if e.kind == "compaction"), None)
