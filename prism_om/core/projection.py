"""Projections of a ledger: what is active, what is visible now, and what a compaction folds.

* **active**: recorded, not dropped, not superseded, not invalidated. An observation is
  invalidated when its id or any of its ``sourceEntryIds`` is in ``invalidated_ids``; a
  reflection when its own id is, when it rests on an invalidated observation (judged
  against the full ledger, so a reflection over an observation that was both dropped and
  revoked stays withheld), or when a reflection it supersedes is withheld: a
  consolidation rests on what it consolidated. A reflection is superseded while the
  reflection that supersedes it is not withheld; when that one is withheld, the
  superseded one (if not withheld itself) is active again, since revoking one source
  must not take the unrelated reflections a consolidation merged with it. A reflection
  over a merely *dropped* observation stays active: dropping prunes the pool, it does not
  retract what was concluded.
* **visible**: active, and not resting only on messages that the recent-messages window
  already shows (every ``sourceEntryId`` inside ``recent_entry_ids``). Reflections are
  summaries over many observations and stay visible while active.
* **folded**: the ``FoldedMemory`` of the active memory, with nothing trimmed.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ..entries import SessionEntry
from .ledger import (
    ObservationalMemoryLedger,
    RecordedObservation,
    RecordedReflection,
    fold_ledger,
)
from .records import FoldedMemory, Observation, Reflection

__all__ = [
    "ObservationalMemoryProjection",
    "active_memory",
    "build_observational_memory_projection_from_entries",
    "invalidated_observation_ids",
    "is_visible_observation",
    "visible_memory",
    "withheld_reflection_ids",
]


@dataclass(frozen=True)
class ObservationalMemoryProjection:
    """Active, visible and folded memory of one branch, with the full ledger for audit."""

    ledger: ObservationalMemoryLedger
    active_observations: tuple[Observation, ...]
    active_reflections: tuple[Reflection, ...]
    visible_observations: tuple[Observation, ...]
    visible_reflections: tuple[Reflection, ...]
    folded: FoldedMemory


def invalidated_observation_ids(
    observations: Iterable[RecordedObservation | Observation], invalidated_ids: Collection[str]
) -> frozenset[str]:
    """Ids of the observations whose own id or any source id is invalidated."""
    if not invalidated_ids:
        return frozenset()
    out: set[str] = set()
    for item in observations:
        obs = item.observation if isinstance(item, RecordedObservation) else item
        if obs.id in invalidated_ids or any(s in invalidated_ids for s in obs.source_entry_ids):
            out.add(obs.id)
    return frozenset(out)


def withheld_reflection_ids(
    ledger: ObservationalMemoryLedger, withheld: Collection[str]
) -> frozenset[str]:
    """Reflections withheld by ``withheld`` (invalidated ids and withheld observation ids).

    A reflection is withheld when its own id is in ``withheld``, when it rests on a
    withheld observation, or when a reflection it supersedes is withheld. Superseded
    reflections are always recorded earlier, so one pass in record order settles it.
    """
    if not withheld:
        return frozenset()
    supersedes: dict[str, list[str]] = {}
    for s in ledger.supersessions:
        supersedes.setdefault(s.superseded_by, []).append(s.reflection_id)
    out: set[str] = set()
    for r in ledger.reflections:
        if (
            r.id in withheld
            or any(o in withheld for o in r.reflection.observation_ids)
            or any(old in out for old in supersedes.get(r.id, ()))
        ):
            out.add(r.id)
    return frozenset(out)


def active_memory(
    ledger: ObservationalMemoryLedger, invalidated_ids: Collection[str] | None = None
) -> tuple[list[RecordedObservation], list[RecordedReflection]]:
    """Active observations and reflections of ``ledger``, in record order."""
    invalid = frozenset(invalidated_ids or ())
    withheld = invalidated_observation_ids(ledger.observations, invalid) | invalid
    observations = [r for r in ledger.live_observations() if r.id not in withheld]
    gone = withheld_reflection_ids(ledger, withheld)
    superseded = ledger.superseded_by
    reflections = [
        r
        for r in ledger.reflections
        if r.id not in gone and (r.id not in superseded or superseded[r.id] in gone)
    ]
    return observations, reflections


def is_visible_observation(observation: Observation, recent_entry_ids: Collection[str]) -> bool:
    """False when every source of ``observation`` is already shown as a recent message."""
    # map over __contains__: no generator frame per observation (this runs every turn).
    return not recent_entry_ids or not all(
        map(recent_entry_ids.__contains__, observation.source_entry_ids)
    )


def visible_memory(
    ledger: ObservationalMemoryLedger,
    invalidated_ids: Iterable[str] | None = None,
    recent_entry_ids: Iterable[str] | None = None,
) -> tuple[tuple[Observation, ...], tuple[Reflection, ...]]:
    """The projection's visible observations and reflections alone: what a turn renders,
    without building the projection's ``FoldedMemory`` (a validation of the whole pool)."""
    observations, reflections = active_memory(ledger, frozenset(invalidated_ids or ()))
    recent = frozenset(recent_entry_ids or ())
    return (
        tuple(r.observation for r in observations if is_visible_observation(r.observation, recent)),
        tuple(r.reflection for r in reflections),
    )


def build_observational_memory_projection_from_entries(
    entries: Sequence[SessionEntry] | ObservationalMemoryLedger,
    *,
    invalidated_ids: Iterable[str] | None = None,
    recent_entry_ids: Iterable[str] | None = None,
) -> ObservationalMemoryProjection:
    """Project a branch (entries root first, or its folded ledger). O(n), pure."""
    ledger = entries if isinstance(entries, ObservationalMemoryLedger) else fold_ledger(entries)
    observations, reflections = active_memory(ledger, frozenset(invalidated_ids or ()))
    active_obs = tuple(r.observation for r in observations)
    active_refl = tuple(r.reflection for r in reflections)
    recent = frozenset(recent_entry_ids or ())
    return ObservationalMemoryProjection(
        ledger=ledger,
        active_observations=active_obs,
        active_reflections=active_refl,
        visible_observations=tuple(o for o in active_obs if is_visible_observation(o, recent)),
        visible_reflections=active_refl,
        folded=FoldedMemory(observations=list(active_obs), reflections=list(active_refl)),
    )
