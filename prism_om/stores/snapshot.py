"""``SessionStore.snapshot``: a branch's memory state read at one leaf, from public reads.

Every adapter answers ``snapshot`` with ``read_branch_snapshot`` over its own reads, each
pinned to the one leaf resolved first, so a writer that appends in between cannot pair
one leaf's memory with another leaf's messages (a branch up to a given leaf never
changes). An adapter that can run several reads as one unit (SQLite: one hop to its
reader thread) wraps this call in that unit; it never writes a second version of it.
"""

from __future__ import annotations

from typing import Protocol

from ..core.branch_snapshot import TAIL_READ_LIMIT, BranchSnapshot, empty_snapshot
from ..core.ledger import ObservationalMemoryLedger
from ..core.recent_window import check_keep_recent_entries
from ..core.scope_map import WorkScopeMap
from ..core.sources import is_eligible_observation_source_entry
from ..entries import SessionEntry, validate_session_id

__all__ = ["SnapshotReads", "read_branch_snapshot"]


class SnapshotReads(Protocol):
    """The public reads a snapshot is made of (every ``SessionStore`` has them)."""

    async def leaf(self, session_id: str) -> str | None: ...

    async def memory_head(self, session_id: str, leaf_id: str | None = None) -> str | None: ...

    async def ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger: ...

    async def live_ledger(
        self, session_id: str, leaf_id: str | None = None
    ) -> ObservationalMemoryLedger: ...

    async def scope_map(self, session_id: str, leaf_id: str | None = None) -> WorkScopeMap: ...

    async def entry_count(self, session_id: str, leaf_id: str | None = None) -> int: ...

    async def entries_after(
        self, session_id: str, after_id: str | None, leaf_id: str | None = None
    ) -> list[SessionEntry]: ...

    async def recent_messages(
        self, session_id: str, count: int, leaf_id: str | None = None
    ) -> list[SessionEntry]: ...

    async def branch_tokens(self, session_id: str, leaf_id: str | None = None) -> int: ...

    async def is_on_branch(
        self, session_id: str, entry_id: str, leaf_id: str | None = None
    ) -> bool: ...


async def read_branch_snapshot(
    store: SnapshotReads,
    session_id: str,
    recent: int,
    leaf_id: str | None,
    full: bool,
    token_encoding: str,
) -> BranchSnapshot:
    """``SessionStore.snapshot`` from the store's own reads, all at one leaf.

    The tail is read by index from the coverage cursor on (``entries_after``); a tail of
    more than ``TAIL_READ_LIMIT`` entries is read as its newest messages instead, so a
    branch nobody observed costs a bounded read. Raises what ``entries`` raises for
    ``leaf_id``.
    """
    validate_session_id(session_id)
    check_keep_recent_entries(recent, "recent")
    leaf = leaf_id if leaf_id is not None else await store.leaf(session_id)
    if leaf is None:
        return empty_snapshot(session_id, recent, full=full, token_encoding=token_encoding)
    head = await store.memory_head(session_id, leaf)
    ledger = await (store.ledger if full else store.live_ledger)(session_id, leaf)
    scopes = await store.scope_map(session_id, leaf)
    count = await store.entry_count(session_id, leaf)
    cover = ledger.observation_covers_up_to_id
    covered = 0 if cover is None else await store.entry_count(session_id, cover)
    complete = count - covered <= TAIL_READ_LIMIT
    if complete:
        tail = await store.entries_after(session_id, cover, leaf)
    else:
        tail = await _newest_uncovered(store, session_id, leaf, cover)
    covered_tokens = 0 if cover is None else await store.branch_tokens(session_id, cover)
    pending = await store.branch_tokens(session_id, leaf) - covered_tokens
    eligible = [e for e in tail if is_eligible_observation_source_entry(e)]
    if len(eligible) >= recent:
        last = eligible[len(eligible) - recent :] if recent else []
    else:
        last = await store.recent_messages(session_id, recent, leaf)
    return BranchSnapshot(
        session_id=session_id,
        leaf_id=leaf,
        memory_head=head,
        ledger=ledger,
        full=full,
        scope_map=scopes,
        tail=tuple(tail),
        tail_complete=complete,
        recent=tuple(last),
        recent_count=recent,
        entry_count=count,
        pending_tokens=pending,
        token_encoding=token_encoding,
    )


async def _newest_uncovered(
    store: SnapshotReads, session_id: str, leaf: str, cover: str | None
) -> list[SessionEntry]:
    """The newest ``TAIL_READ_LIMIT`` messages after ``cover``: the last messages of the
    branch, less those at or before the cursor (found by a binary search of
    ``is_on_branch``, a handful of reads, when the messages reach back past it)."""
    found = await store.recent_messages(session_id, TAIL_READ_LIMIT, leaf)
    if cover is None or not found:
        return found

    async def after(index: int) -> bool:
        entry = found[index]
        return entry.id != cover and await store.is_on_branch(session_id, cover, entry.id)

    if await after(0):
        return found
    lo, hi = 0, len(found)  # after(lo) is False; after(hi) is taken as True
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if await after(mid):
            hi = mid
        else:
            lo = mid
    return found[hi:]
