"""The two coverage windows: what the observer has not scanned, what the reflector has not seen.

* Observation scan: every entry after the observation coverage cursor (all entries when
  there is none). Memory records and compactions are included, because scanning past them
  is progress; ``eligible_observation_sources`` then picks what enters the prompt.
* Reflection window: active observations recorded after the record that carried the
  latest reflection coverage (all active observations when there is none). Measuring from
  the carrying record, not from the entry its ``coversUpToId`` names, keeps the window
  answerable from the ledger alone; the runtime appends that record right after the
  reflector reads, so the two positions bound the same observations.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..core.ledger import ObservationalMemoryLedger, fold_ledger
from ..core.projection import active_memory
from ..core.records import Observation
from ..entries import SessionEntry
from ..errors import EntryNotFoundError
from ..stores.base import SessionStore

__all__ = [
    "observations_uncovered_by_reflection_from_entries",
    "observations_uncovered_by_reflection_from_store",
    "unscanned_entries_from_entries",
    "unscanned_entries_from_store",
]


def unscanned_entries_from_entries(
    entries: Sequence[SessionEntry], ledger: ObservationalMemoryLedger | None = None
) -> list[SessionEntry]:
    """Entries after the observation coverage cursor of ``ledger`` (folded from ``entries``).

    Raises ``EntryNotFoundError`` when the cursor names no entry of ``entries``: guessing
    would either observe the whole branch again or skip part of it.
    """
    if ledger is None:
        ledger = fold_ledger(entries)
    cursor = ledger.observation_covers_up_to_id
    if cursor is None:
        return list(entries)
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].id == cursor:
            return list(entries[index + 1 :])
    raise EntryNotFoundError(
        f"observation coverage cursor {cursor!r} is not an entry of the supplied branch",
        entry_id=cursor,
    )


async def unscanned_entries_from_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None = None,
    ledger: ObservationalMemoryLedger | None = None,
) -> list[SessionEntry]:
    """Like ``unscanned_entries_from_entries``, reading only the entries after the cursor."""
    if ledger is None:
        ledger = await store.ledger(session_id, leaf_id)
    cursor = ledger.observation_covers_up_to_id
    try:
        return await store.entries_after(session_id, cursor, leaf_id)
    except EntryNotFoundError:
        raise EntryNotFoundError(
            f"observation coverage cursor {cursor!r} is not an entry of the branch",
            entry_id=cursor,
            session_id=session_id,
            url=store.url,
        ) from None


def observations_uncovered_by_reflection_from_entries(
    source: Sequence[SessionEntry] | ObservationalMemoryLedger,
    *,
    invalidated_ids: Iterable[str] | None = None,
) -> list[Observation]:
    """Active observations recorded after the latest reflection coverage, in record order."""
    ledger = source if isinstance(source, ObservationalMemoryLedger) else fold_ledger(source)
    observations, _ = active_memory(ledger, frozenset(invalidated_ids or ()))
    coverage = ledger.reflection_coverage
    after = -1 if coverage is None else coverage.record_position
    return [r.observation for r in observations if r.recorded_position > after]


async def observations_uncovered_by_reflection_from_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
) -> list[Observation]:
    """Like ``observations_uncovered_by_reflection_from_entries``, over the store's ledger."""
    ledger = await store.ledger(session_id, leaf_id)
    return observations_uncovered_by_reflection_from_entries(
        ledger, invalidated_ids=invalidated_ids
    )
