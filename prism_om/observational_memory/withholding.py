"""The ledger a store read must judge revoked memory on, and the active memory it gives.

The withholding rule (:mod:`prism_om.core.withheld`, :mod:`prism_om.core.projection`)
follows what a reflection rests on: its observations, and the reflections it supersedes.
A store's live ledger has neither the dropped observations nor the superseded reflections,
so after the standard revocation flow (the tombstone, then the drop handler dropping the
observation) a reflection over the revoked observation looks as if it rested on nothing
revoked. With nothing invalidated the live ledger gives the same active memory at a cost
that follows the live memory; with anything invalidated only the full ledger is enough.
Every read path that reads memory from a store to show it goes through here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..core.ledger import ObservationalMemoryLedger, RecordedObservation, RecordedReflection
from ..core.projection import active_memory

if TYPE_CHECKING:
    from ..stores.base import SessionStore

__all__ = ["active_store_memory", "withholding_ledger"]


async def withholding_ledger(
    store: SessionStore,
    session_id: str,
    invalidated_ids: Iterable[str] | None,
    leaf_id: str | None = None,
) -> ObservationalMemoryLedger:
    """``store.ledger`` when ``invalidated_ids`` names anything, else ``store.live_ledger``."""
    if frozenset(invalidated_ids or ()):
        return await store.ledger(session_id, leaf_id)
    return await store.live_ledger(session_id, leaf_id)


async def active_store_memory(
    store: SessionStore,
    session_id: str,
    invalidated_ids: Iterable[str] | None,
    leaf_id: str | None = None,
) -> tuple[list[RecordedObservation], list[RecordedReflection]]:
    """``active_memory`` of the branch under ``invalidated_ids``, judged on the ledger
    ``withholding_ledger`` reads."""
    invalid = frozenset(invalidated_ids or ())
    ledger = await withholding_ledger(store, session_id, invalid, leaf_id)
    return active_memory(ledger, invalid)
