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

from collections.abc import Awaitable, Iterable, Sequence
from typing import TYPE_CHECKING, overload

from ..entries import SessionEntry
from ..errors import EntryNotFoundError
from ._source import is_store, store_session
from .ledger import ObservationalMemoryLedger, fold_observational_memory_ledger
from .projection import active_memory
from .records import Observation

if TYPE_CHECKING:
    from ..stores.base import SessionStore

__all__ = ["observations_uncovered_by_reflection", "unscanned_entries"]


@overload
def unscanned_entries(
    entries: Sequence[SessionEntry], ledger: ObservationalMemoryLedger | None = None
) -> list[SessionEntry]: ...


@overload
def unscanned_entries(
    entries: SessionStore,
    ledger: ObservationalMemoryLedger | None = None,
    *,
    session_id: str,
    leaf_id: str | None = None,
) -> Awaitable[list[SessionEntry]]: ...


def unscanned_entries(
    entries: Sequence[SessionEntry] | SessionStore,
    ledger: ObservationalMemoryLedger | None = None,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
) -> list[SessionEntry] | Awaitable[list[SessionEntry]]:
    """Entries after the observation coverage cursor of ``ledger`` (folded from ``entries``).

    Raises ``EntryNotFoundError`` when the cursor names no entry of ``entries``: guessing
    would either observe the whole branch again or skip part of it. Given a store, reads
    only the entries after the cursor.
    """
    if is_store(entries):
        sid = store_session(session_id, "unscanned_entries")
        return _unscanned_from_store(entries, sid, leaf_id, ledger)
    if ledger is None:
        ledger = fold_observational_memory_ledger(entries)
    cursor = ledger.observation_covers_up_to_id
    if cursor is None:
        return list(entries)
    for index in range(len(entries) - 1, -1, -1):
        if entries[index].id == cursor:
            return list(entries[index + 1 :])
    raise EntryNotFoundError(
        f"observation coverage cursor {cursor!r} is not an entry of the supplied branch"
    )


async def _unscanned_from_store(
    store: SessionStore,
    session_id: str,
    leaf_id: str | None,
    ledger: ObservationalMemoryLedger | None,
) -> list[SessionEntry]:
    if ledger is None:
        ledger = await store.ledger(session_id, leaf_id)
    cursor = ledger.observation_covers_up_to_id
    try:
        return await store.entries_after(session_id, cursor, leaf_id)
    except EntryNotFoundError:
        raise EntryNotFoundError(
            f"observation coverage cursor {cursor!r} is not an entry of the branch"
        ) from None


@overload
def observations_uncovered_by_reflection(
    source: Sequence[SessionEntry] | ObservationalMemoryLedger,
    *,
    invalidated_ids: Iterable[str] | None = None,
) -> list[Observation]: ...


@overload
def observations_uncovered_by_reflection(
    source: SessionStore,
    *,
    session_id: str,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
) -> Awaitable[list[Observation]]: ...


def observations_uncovered_by_reflection(
    source: Sequence[SessionEntry] | ObservationalMemoryLedger | SessionStore,
    *,
    session_id: str | None = None,
    leaf_id: str | None = None,
    invalidated_ids: Iterable[str] | None = None,
) -> list[Observation] | Awaitable[list[Observation]]:
    """Active observations recorded after the latest reflection coverage, in record order."""
    if is_store(source):
        sid = store_session(session_id, "observations_uncovered_by_reflection")
        return _uncovered_from_store(source, sid, leaf_id, invalidated_ids)
    ledger = (
        source
        if isinstance(source, ObservationalMemoryLedger)
        else fold_observational_memory_ledger(source)
    )
    observations, _ = active_memory(ledger, frozenset(invalidated_ids or ()))
    coverage = ledger.reflection_coverage
    after = -1 if coverage is None else coverage.record_position
    return [r.observation for r in observations if r.recorded_position > after]


async def _uncovered_from_store(
    store: SessionStore, session_id: str, leaf_id: str | None, invalidated: Iterable[str] | None
) -> list[Observation]:
    ledger = await store.ledger(session_id, leaf_id)
    return observations_uncovered_by_reflection(ledger, invalidated_ids=invalidated)
