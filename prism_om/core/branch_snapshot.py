"""One branch's memory state at one leaf: everything a turn reads, read once.

A turn needs the branch's memory head, its live memory, its work-scope map, the entries
the observer has not covered yet (the *tail*), the last few messages and a few counters.
Read one by one against "the current leaf", a concurrent writer can slip in between two
reads and pair the memory of one leaf with the messages of another. A ``BranchSnapshot``
holds them all for **one** leaf, and because a branch is append-only, the snapshot of a
leaf never goes stale: the same leaf always has the same snapshot. That is what lets a
host keep the snapshot across a turn and *advance* it by the entries the turn appended
(``advance_snapshot``) instead of reading the store again: the advanced snapshot equals
what a fresh read at the new leaf returns (a property test holds the two equal).

``snapshot_from_branch`` is the reference, over a branch's entries; stores answer
``SessionStore.snapshot`` from their indexes (``stores.base.read_branch_snapshot``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from ..entries import SessionEntry
from ..tokens import TokenEstimator, get_estimator
from .ledger import ObservationalMemoryLedger, fold_ledger
from .ledger_views import live_ledger
from .records import is_memory_record
from .scope_map import WorkScopeMap, fold_work_scope_map
from .sources import is_eligible_observation_source_entry

__all__ = [
    "TAIL_READ_LIMIT",
    "BranchSnapshot",
    "advance_snapshot",
    "empty_snapshot",
    "snapshot_from_branch",
    "tail_message_tokens",
]

_SCOPE_PREFIX: Final = "om.scope."

TAIL_READ_LIMIT: Final = 2000
"""Entries of the uncovered tail a snapshot reads at most. A tail longer than this (a bulk
import never observed, an observer that keeps failing) is read as its newest
``TAIL_READ_LIMIT`` messages, with ``tail_complete`` False: the read stays bounded, and the
host knows the tail did not fit."""


@dataclass(frozen=True)
class BranchSnapshot:
    """What a turn reads of one branch, all at ``leaf_id``."""

    session_id: str
    leaf_id: str | None
    """The leaf read at; None for a session without entries."""
    memory_head: str | None
    """``SessionStore.memory_head`` at the leaf."""
    ledger: ObservationalMemoryLedger
    """The live ledger (``full`` False) or the whole ledger (``full`` True: a read that
    withholds revoked memory needs what the dropped observations rested on)."""
    full: bool
    scope_map: WorkScopeMap
    tail: tuple[SessionEntry, ...]
    """The branch entries after the observer's coverage (``ledger.observation_covers_up_to_id``),
    root side first; every entry of the branch when nothing is covered yet."""
    tail_complete: bool
    """False when the tail was longer than ``TAIL_READ_LIMIT`` entries: ``tail`` then
    holds only its newest ``TAIL_READ_LIMIT`` eligible messages."""
    recent: tuple[SessionEntry, ...]
    """The branch's last ``recent_count`` eligible messages, oldest first."""
    recent_count: int
    entry_count: int
    """Entries on the branch, root included."""
    pending_tokens: int
    """Tokens of the message entries after the coverage (what ``observation.message_tokens``
    gates), counted with ``token_encoding``."""
    token_encoding: str

    @property
    def uncovered_messages(self) -> tuple[SessionEntry, ...]:
        """The eligible messages of the tail: what memory does not cover yet."""
        return tuple(e for e in self.tail if is_eligible_observation_source_entry(e))


def empty_snapshot(
    session_id: str, recent_count: int, *, full: bool = False, token_encoding: str = ""
) -> BranchSnapshot:
    """The snapshot of a session without entries."""
    return BranchSnapshot(
        session_id=session_id,
        leaf_id=None,
        memory_head=None,
        ledger=ObservationalMemoryLedger(),
        full=full,
        scope_map=fold_work_scope_map([]),
        tail=(),
        tail_complete=True,
        recent=(),
        recent_count=recent_count,
        entry_count=0,
        pending_tokens=0,
        token_encoding=token_encoding or get_estimator().name,
    )


def tail_message_tokens(tail: Sequence[SessionEntry], estimator: TokenEstimator) -> int:
    """Tokens of the message entries of ``tail`` (``SessionStore.branch_tokens``' count)."""
    return sum(estimator.count_entry(e) for e in tail if e.kind == "message")


def _last_eligible(entries: Sequence[SessionEntry], count: int) -> tuple[SessionEntry, ...]:
    chosen: list[SessionEntry] = []
    for entry in reversed(entries):
        if len(chosen) >= count:
            break
        if is_eligible_observation_source_entry(entry):
            chosen.append(entry)
    chosen.reverse()
    return tuple(chosen)


def snapshot_from_branch(
    branch: Sequence[SessionEntry],
    recent_count: int,
    *,
    full: bool = False,
    estimator: TokenEstimator | None = None,
) -> BranchSnapshot:
    """The snapshot at the last entry of ``branch`` (root first). O(n), pure."""
    est = estimator or get_estimator()
    if not branch:
        return empty_snapshot("", recent_count, full=full, token_encoding=est.name)
    whole = fold_ledger(branch)
    ledger = whole if full else live_ledger(whole)
    cover = ledger.observation_covers_up_to_id
    start = 0
    if cover is not None:
        start = next(i for i, e in enumerate(branch) if e.id == cover) + 1
    tail = tuple(branch[start:])
    complete = len(tail) <= TAIL_READ_LIMIT
    pending = tail_message_tokens(tail, est)
    if not complete:
        tail = _last_eligible(tail, TAIL_READ_LIMIT)
    head = next((e.id for e in reversed(branch) if is_memory_record(e)), None)
    return BranchSnapshot(
        session_id=branch[-1].session_id,
        leaf_id=branch[-1].id,
        memory_head=head,
        ledger=ledger,
        full=full,
        scope_map=fold_work_scope_map(branch),
        tail=tail,
        tail_complete=complete,
        recent=_last_eligible(branch, recent_count),
        recent_count=recent_count,
        entry_count=len(branch),
        pending_tokens=pending,
        token_encoding=est.name,
    )


def advance_snapshot(
    snapshot: BranchSnapshot, appended: Sequence[SessionEntry]
) -> BranchSnapshot | None:
    """The snapshot after ``appended`` (a chain under ``snapshot.leaf_id``), or None when
    only a read can tell: a memory or scope record moves the memory, a break in the chain
    means another writer came in between.

    Messages and other entries only extend the tail, the recent messages and the
    counters, so this costs the appended entries, not the branch.
    """
    if not appended:
        return snapshot
    parent = snapshot.leaf_id
    for entry in appended:
        if entry.parent_id != parent or entry.session_id != snapshot.session_id:
            return None
        if is_memory_record(entry) or (entry.custom_type or "").startswith(_SCOPE_PREFIX):
            return None
        parent = entry.id
    est = get_estimator(snapshot.token_encoding)
    tail = (*snapshot.tail, *appended)
    complete = snapshot.tail_complete and len(tail) <= TAIL_READ_LIMIT
    if not complete:
        tail = _last_eligible(tail, TAIL_READ_LIMIT)
    return replace(
        snapshot,
        leaf_id=appended[-1].id,
        tail=tail,
        tail_complete=complete,
        recent=_last_eligible((*snapshot.recent, *appended), snapshot.recent_count),
        entry_count=snapshot.entry_count + len(appended),
        pending_tokens=snapshot.pending_tokens + tail_message_tokens(appended, est),
    )
