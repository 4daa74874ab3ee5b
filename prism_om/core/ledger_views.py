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
        # "Is this reflection superseded, and by which?" travels with the superseded id.
        supersessions=tuple(s for s in ledger.supersessions if s.reflection_id in memory_ids),
    )


def live_ledger(ledger: ObservationalMemoryLedger) -> ObservationalMemoryLedger:
    """The ledger less its dropped observations and superseded reflections (and both
    lists): the same active memory when nothing is invalidated. A read that withholds
    revoked memory needs the full ledger (a reflection may rest on a revoked one through
    those it supersedes)."""
    dropped = frozenset(ledger.dropped_observation_ids)
    superseded = ledger.superseded_by
    return replace(
        ledger,
        observations=tuple(r for r in ledger.observations if r.id not in dropped),
        reflections=tuple(r for r in ledger.reflections if r.id not in superseded),
        dropped_observation_ids=(),
        supersessions=(),
    )
