"""``BranchView``: one session's branch as the next turn sees it, read once per turn.

A turn needs the memory block, the request window (every message memory has not covered,
and the last few: ``core.request_window``) and the counters the memory workers' thresholds
read. The view reads them as one ``SessionStore.snapshot`` and keeps it. Because a branch
is append-only, the snapshot of a leaf never changes, so:

* the next turn checks only that the session's leaf is still the one the view holds (one
  cheap read) before reusing it, and reads a new snapshot only when it moved;
* after a turn the view is *advanced* by the entries the turn appended
  (``core.branch_snapshot.advance_snapshot``), which equals a fresh read at the new leaf;
  a memory or scope record, or another writer's entry in between, makes the view read
  again instead.

The rendered memory block is kept by what it shows (memory head, rendered ids, scope
state), so a turn whose memory did not change renders and tokenises none of it; the window
is rendered afresh and counted line by line, so only new messages are encoded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from ..core.branch_snapshot import BranchSnapshot, advance_snapshot
from ..core.context_blocks import (
    BlockOptions,
    ContextBlock,
    context_blocks_with_window,
    render_memory,
)
from ..core.recent_window import MessageBlocks
from ..core.records import Observation, Reflection
from ..core.redaction import Redactor, redactor
from ..core.render import RenderedMemory
from ..core.request_window import RequestWindow
from ..entries import SessionEntry
from ..session import Session
from ..tokens import TokenEstimator

__all__ = ["BranchView", "TurnBlocks"]

_RENDER_CACHE_SIZE: Final = 8


@dataclass(frozen=True)
class TurnBlocks:
    """The blocks of one snapshot, with the window the rule chose for it."""

    snapshot: BranchSnapshot
    blocks: tuple[ContextBlock, ...]
    window: RequestWindow
    invalidated_ids: frozenset[str]

    @property
    def tokens(self) -> int:
        """Tokens of the blocks' text, as counted when they were built."""
        return sum(b.tokens for b in self.blocks)


class BranchView:
    """The next turn's memory context of one session; see the module docstring."""

    def __init__(
        self,
        *,
        keep_recent_entries: int,
        recent_message_max_tokens: int | None,
        estimator: TokenEstimator,
        secrets: Sequence[str] | Redactor = (),
    ) -> None:
        self.keep_recent_entries = keep_recent_entries
        self.recent_message_max_tokens = recent_message_max_tokens
        self.estimator = estimator
        self._redactor = secrets if isinstance(secrets, Redactor) else redactor(secrets)
        self._blocks = MessageBlocks(self._redactor, estimator)
        self._snapshot: BranchSnapshot | None = None
        self._renders: dict[tuple[Any, ...], tuple[RenderedMemory, int]] = {}
        self.reads = 0
        """Store reads this view made (a snapshot or a leaf check each): for tests."""

    @property
    def snapshot(self) -> BranchSnapshot | None:
        """The snapshot the view holds (None before the first read or after ``forget``)."""
        return self._snapshot

    def forget(self) -> None:
        """Read afresh next time (a worker appended memory, or the caller knows better)."""
        self._snapshot = None

    async def read(
        self, session: Session, *, full: bool = False, trust_held: bool = False
    ) -> BranchSnapshot:
        """The snapshot at the session's current leaf: the one held when the leaf did not
        move (one ``leaf`` read), else a new ``snapshot`` read. ``trust_held``: the caller
        checked the leaf this turn already, so a held snapshot is used as it is."""
        store = session.store
        held = self._snapshot
        if held is not None and held.session_id == session.id and (held.full or not full):
            if trust_held:
                return held
            self.reads += 1
            if await store.leaf(session.id) == held.leaf_id:
                return held
        self.reads += 1
        snapshot = await store.snapshot(session.id, recent=self.keep_recent_entries, full=full)
        self._snapshot = snapshot
        return snapshot

    def advance(self, appended: Sequence[SessionEntry]) -> BranchSnapshot | None:
        """The held snapshot moved past ``appended`` (entries as stored, a chain under its
        leaf), or None (and nothing held) when only a read can tell what changed."""
        held = self._snapshot
        if held is None:
            return None
        advanced = advance_snapshot(held, appended)
        self._snapshot = advanced
        return advanced

    def blocks(
        self,
        snapshot: BranchSnapshot,
        invalidated_ids: Iterable[str] = (),
        *,
        budget_tokens: int | None = None,
    ) -> TurnBlocks:
        """The memory block (kept while what it shows is unchanged) and the request window
        of ``snapshot``; ``budget_tokens`` is what the model's input leaves for the window.
        Equal to ``core.context_blocks.context_blocks_from_snapshot``."""
        invalid = frozenset(invalidated_ids)
        options = BlockOptions(
            self.keep_recent_entries,
            self.recent_message_max_tokens,
            invalid,
            self._redactor,
            self.estimator,
            budget_tokens,
            self._blocks,
        )
        blocks, window = context_blocks_with_window(snapshot, options, self._render)
        return TurnBlocks(snapshot, tuple(blocks), window, invalid)

    def _render(
        self,
        reflections: Sequence[Reflection],
        observations: Sequence[Observation],
        outline: str | None,
        red: Redactor,
        snapshot: BranchSnapshot,
    ) -> tuple[RenderedMemory, int]:
        """``core.context_blocks.render_memory``, kept by what it shows: the same memory
        head, ids and outline render the same text (records never change)."""
        key = (
            snapshot.session_id,
            snapshot.memory_head,
            outline,
            tuple(r.id for r in reflections),
            tuple(o.id for o in observations),
        )
        kept = self._renders.get(key)
        if kept is not None:
            return kept
        found = render_memory(reflections, observations, outline, red, snapshot, self.estimator)
        if len(self._renders) >= _RENDER_CACHE_SIZE:
            self._renders.pop(next(iter(self._renders)))
        self._renders[key] = found
        return found
