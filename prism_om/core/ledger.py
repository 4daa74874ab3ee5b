"""The ledger: every memory record of one branch, folded into a plain comparable value.

The fold reads only ``om.*`` custom entries and ``om.folded`` compactions, plus each
entry's position on the branch (its index in the list, root = 0, which is its depth in the
tree when the list is a whole branch). Everything in the ledger is therefore derivable
from those entries alone, so a store can keep it as rows keyed by the recording entry and
rebuild a ledger that compares equal to this fold.

Fold rules, applied in branch order:

* ``om.observations.recorded``: each observation whose id is not yet recorded on the
  branch (as an observation or a reflection; the two share one id namespace) is appended
  to ``observations``; a repeated id is ignored, the first record wins.
* ``om.reflections.recorded``: likewise for ``reflections``. A new reflection's
  ``supersedesReflectionIds`` each supersede a reflection recorded by an *earlier* entry
  of the branch and not superseded yet; each such pair is appended to ``supersessions``
  (record order, then list order); other ids are ignored, as drops ignore theirs.
* ``om.observations.dropped``: each id that names an observation recorded earlier on the
  branch and not yet dropped is appended to ``dropped_observation_ids``; other ids are
  ignored, so dropped ids are always a subset of recorded ones, in first-drop order.
* a compaction whose ``data.memory`` is ``om.folded``: its ``droppedObservationIds`` (the
  observations it trimmed) are dropped by the same rule, at the compaction's position.
* a record with ``coversUpToId`` moves that record type's coverage to it (the latest such
  record wins); a record without one leaves coverage where it was, because a tombstone
  drop or a host-written record is not a worker's progress. Compactions never move it.
* ``last_observations_entry_id`` / ``last_reflections_entry_id`` name the latest record of
  each type, with or without coverage.

A malformed memory record raises ``MemoryRecordError`` (see :mod:`.parse`); stores
validate records at append time, so a branch read back from a store never does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property

from ..entries import SessionEntry
from .parse import parse_memory_record
from .records import (
    FoldedMemory,
    Observation,
    ObservationsDropped,
    ObservationsRecorded,
    Reflection,
    ReflectionsRecorded,
    dated_observation,
)

__all__ = [
    "Coverage",
    "Supersession",
    "ObservationalMemoryLedger",
    "RecordedObservation",
    "RecordedReflection",
    "branch_source_times",
    "extend_observational_memory_ledger",
    "fold_ledger",
]


@dataclass(frozen=True)
class RecordedObservation:
    """An observation together with the entry that recorded it."""

    observation: Observation
    recorded_entry_id: str
    recorded_at: str
    """The recording entry's timestamp."""
    recorded_position: int
    """The recording entry's index on the branch (root = 0): its depth in the tree."""

    @property
    def id(self) -> str:
        return self.observation.id


@dataclass(frozen=True)
class RecordedReflection:
    """A reflection together with the entry that recorded it."""

    reflection: Reflection
    recorded_entry_id: str
    recorded_at: str
    recorded_position: int

    @property
    def id(self) -> str:
        return self.reflection.id


@dataclass(frozen=True)
class Supersession:
    """One reflection consolidated into a later one (``supersedesReflectionIds``)."""

    reflection_id: str
    """The superseded reflection."""
    superseded_by: str
    """The reflection that supersedes it."""


@dataclass(frozen=True)
class Coverage:
    """A coverage cursor: how far a worker run got, and the record that said so."""

    covers_up_to_id: str
    """The last branch entry the run covered."""
    record_entry_id: str
    record_position: int


@dataclass(frozen=True)
class ObservationalMemoryLedger:
    """Every observation, reflection, drop and coverage cursor of one branch."""

    observations: tuple[RecordedObservation, ...] = ()
    reflections: tuple[RecordedReflection, ...] = ()
    dropped_observation_ids: tuple[str, ...] = ()
    observation_coverage: Coverage | None = None
    reflection_coverage: Coverage | None = None
    drop_coverage: Coverage | None = None
    last_observations_entry_id: str | None = None
    last_reflections_entry_id: str | None = None
    supersessions: tuple[Supersession, ...] = ()
    """Superseded reflections, in branch order (a reflection is superseded at most once)."""

    # Derived views: cached per instance, never part of equality.

    @property
    def observation_covers_up_to_id(self) -> str | None:
        return self.observation_coverage.covers_up_to_id if self.observation_coverage else None

    @property
    def reflection_covers_up_to_id(self) -> str | None:
        return self.reflection_coverage.covers_up_to_id if self.reflection_coverage else None

    @property
    def drop_covers_up_to_id(self) -> str | None:
        return self.drop_coverage.covers_up_to_id if self.drop_coverage else None

    @cached_property
    def observations_by_id(self) -> dict[str, RecordedObservation]:
        return {r.id: r for r in self.observations}

    @cached_property
    def reflections_by_id(self) -> dict[str, RecordedReflection]:
        return {r.id: r for r in self.reflections}

    @cached_property
    def superseded_by(self) -> dict[str, str]:
        """Superseded reflection id -> the reflection that supersedes it."""
        return {s.reflection_id: s.superseded_by for s in self.supersessions}

    def live_observations(self) -> list[RecordedObservation]:
        """Recorded observations that no drop retired, in record order."""
        dropped = frozenset(self.dropped_observation_ids)
        return [r for r in self.observations if r.id not in dropped]


class LedgerBuilder:
    """Folds entries one at a time; ``build()`` snapshots the ledger so far.

    The stores' incremental path and the pure fold share this one implementation. With
    ``live=True`` it folds the *live* view instead (``ledger_views.live_ledger`` of the
    ledger: no dropped observation, no superseded reflection, neither list) from a live
    ``start``: a drop or a supersession removes what it retires, so extending costs the
    live memory and the new records, not every record ever made. That relies on what every
    store checks at append: a record never reuses an id already recorded on its branch.
    """

    def __init__(
        self,
        start: ObservationalMemoryLedger | None = None,
        *,
        source_time: Callable[[str], str | None] | None = None,
        live: bool = False,
    ) -> None:
        start = start or ObservationalMemoryLedger()
        self._live = live
        self._retired: set[str] = set()
        # Dates an observation recorded without ``observedAt`` (see ``dated_observation``).
        self._source_time = source_time or _no_time
        self._observations = list(start.observations)
        self._reflections = list(start.reflections)
        self._dropped = list(start.dropped_observation_ids)
        self._observation_ids = {r.id for r in start.observations}
        self._memory_ids = self._observation_ids | {r.id for r in start.reflections}
        self._dropped_ids = set(start.dropped_observation_ids)
        self._observation_coverage = start.observation_coverage
        self._reflection_coverage = start.reflection_coverage
        self._drop_coverage = start.drop_coverage
        self._last_observations = start.last_observations_entry_id
        self._last_reflections = start.last_reflections_entry_id
        self._supersessions = list(start.supersessions)
        self._reflection_ids = {r.id for r in start.reflections}
        self._superseded_ids = {s.reflection_id for s in start.supersessions}

    def add(self, entry: SessionEntry, position: int) -> None:
        """Fold one entry found at ``position`` on the branch."""
        record = parse_memory_record(entry)
        if record is None:
            return
        if isinstance(record, ObservationsRecorded):
            for payload in record.observations:
                if payload.id not in self._memory_ids:
                    self._memory_ids.add(payload.id)
                    self._observation_ids.add(payload.id)
                    observation = dated_observation(payload, self._source_time, entry.timestamp)
                    self._observations.append(
                        RecordedObservation(observation, entry.id, entry.timestamp, position)
                    )
            self._last_observations = entry.id
            if record.covers_up_to_id is not None:
                self._observation_coverage = Coverage(record.covers_up_to_id, entry.id, position)
        elif isinstance(record, ReflectionsRecorded):
            # Only reflections of earlier entries can be superseded.
            earlier = frozenset(self._reflection_ids)
            for reflection in record.reflections:
                if reflection.id not in self._memory_ids:
                    self._memory_ids.add(reflection.id)
                    self._reflection_ids.add(reflection.id)
                    self._reflections.append(
                        RecordedReflection(reflection, entry.id, entry.timestamp, position)
                    )
                    self._supersede(reflection, earlier)
            self._last_reflections = entry.id
            if record.covers_up_to_id is not None:
                self._reflection_coverage = Coverage(record.covers_up_to_id, entry.id, position)
        elif isinstance(record, ObservationsDropped):
            self._drop(record.observation_ids)
            if record.covers_up_to_id is not None:
                self._drop_coverage = Coverage(record.covers_up_to_id, entry.id, position)
        elif isinstance(record, FoldedMemory):
            # Trimmed by a compaction: dropped from here on, without moving any coverage.
            self._drop(record.dropped_observation_ids)

    def _supersede(self, reflection: Reflection, earlier: frozenset[str]) -> None:
        for old in reflection.supersedes_reflection_ids or ():
            if old in earlier and old not in self._superseded_ids:
                self._superseded_ids.add(old)
                if self._live:
                    self._retired.add(old)
                    self._reflection_ids.discard(old)
                else:
                    self._supersessions.append(Supersession(old, reflection.id))

    def _drop(self, ids: Iterable[str]) -> None:
        for observation_id in ids:
            if observation_id in self._observation_ids and observation_id not in self._dropped_ids:
                self._dropped_ids.add(observation_id)
                if self._live:
                    self._retired.add(observation_id)
                    self._observation_ids.discard(observation_id)
                else:
                    self._dropped.append(observation_id)

    def build(self) -> ObservationalMemoryLedger:
        observations, reflections = self._observations, self._reflections
        if self._retired:
            retired = self._retired
            observations = [r for r in observations if r.id not in retired]
            reflections = [r for r in reflections if r.id not in retired]
        return ObservationalMemoryLedger(
            observations=tuple(observations),
            reflections=tuple(reflections),
            dropped_observation_ids=tuple(self._dropped),
            observation_coverage=self._observation_coverage,
            reflection_coverage=self._reflection_coverage,
            drop_coverage=self._drop_coverage,
            last_observations_entry_id=self._last_observations,
            last_reflections_entry_id=self._last_reflections,
            supersessions=tuple(self._supersessions),
        )


def fold_ledger(entries: Iterable[SessionEntry]) -> ObservationalMemoryLedger:
    """Fold a branch's entries (root first) into its ledger. O(n), pure."""
    branch = entries if isinstance(entries, Sequence) else list(entries)
    builder = LedgerBuilder(source_time=branch_source_times(branch))
    for position, entry in enumerate(branch):
        builder.add(entry, position)
    return builder.build()


def extend_observational_memory_ledger(
    ledger: ObservationalMemoryLedger,
    entries: Sequence[SessionEntry] | Iterable[SessionEntry],
    *,
    first_position: int,
    source_time: Callable[[str], str | None] | None = None,
) -> ObservationalMemoryLedger:
    """Continue a fold with the entries that follow it on the branch.

    ``first_position`` is the position of ``entries[0]`` (the length of the prefix that
    ``ledger`` folded). Folding a prefix and extending with the rest equals folding the
    whole branch when ``source_time`` knows the whole branch's timestamps (see
    ``branch_source_times``); without it only ``entries`` are known.
    """
    branch = entries if isinstance(entries, Sequence) else list(entries)
    builder = LedgerBuilder(ledger, source_time=source_time or branch_source_times(branch))
    for offset, entry in enumerate(branch):
        builder.add(entry, first_position + offset)
    return builder.build()


def branch_source_times(branch: Sequence[SessionEntry]) -> Callable[[str], str | None]:
    """Entry id -> timestamp over ``branch``, indexed only if a record needs a date.

    Records written by our workers carry ``observedAt``, so the index is usually never built.
    """
    index: dict[str, str] | None = None

    def source_time(entry_id: str) -> str | None:
        nonlocal index
        if index is None:
            index = {e.id: e.timestamp for e in branch if e.kind == "message"}
        return index.get(entry_id)

    return source_time


def _no_time(entry_id: str) -> str | None:
    return None
