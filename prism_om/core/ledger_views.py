"""Views of a folded ledger that every store answers alike.

An indexed store computes these from its fold tables; the branch-derived stores compute
them here, and the conformance suite compares the two.
"""

from __future__ import annotations

from dataclasses import replace

from .ledger import ObservationalMemoryLedger

__all__ = ["live_ledger", "restrict_ledger"]


def restrict_ledger(
    ledger: ObservationalMemoryLedger, memory_ids: set[str]
) -> ObservationalMemoryLedger:
    """Only the observations, reflections and drops of ``memory_ids``."""
    return ObservationalMemoryLedger(
        observations=tuple(r for r in ledger.observations if r.id in memory_ids),
        reflections=tuple(r for r in ledger.reflections if r.id in memory_ids),
        dropped_observation_ids=tuple(i for i in ledger.dropped_observation_ids if i in memory_ids),
    )


def live_ledger(ledger: ObservationalMemoryLedger) -> ObservationalMemoryLedger:
    """The ledger less its dropped observations and drop list: same active memory."""
    dropped = frozenset(ledger.dropped_observation_ids)
    return replace(
        ledger,
        observations=tuple(r for r in ledger.observations if r.id not in dropped),
        dropped_observation_ids=(),
    )
