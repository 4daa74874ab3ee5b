"""The ``om.*`` custom-entry records and their payloads, on the specification's wire names."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Annotated, Any, Final, Literal

from pydantic import AfterValidator, Field, field_validator, model_validator

from ..entries import ENTRY_ID_MAX_CHARS, SessionEntry, WireModel
from ..ids import MEMORY_ID_PATTERN
from .scope_map import (
    SCOPE_BOUND,
    SCOPE_CLOSED,
    SCOPE_ENTERED,
    SCOPE_GRANTED,
    SCOPE_LEFT,
    SCOPE_OPENED,
    SCOPE_REVOKED,
    SCOPE_UNBOUND,
)

__all__ = [
    "COMPACTION_STRATEGY_NAME",
    "ENTRY_ID_MAX_CHARS",
    "FOLDED_TYPE",
    "MEMORY_RECORD_TYPES",
    "OBSERVATIONS_DROPPED",
    "OBSERVATIONS_RECORDED",
    "PRIORITY_RANK",
    "REFLECTIONS_RECORDED",
    "SCOPE_RECORD_TYPES",
    "FoldedMemory",
    "Observation",
    "ObservationPayload",
    "ObservationsDropped",
    "ObservationsRecorded",
    "EntryRef",
    "MemoryId",
    "Priority",
    "Reflection",
    "ReflectionsRecorded",
    "dated_observation",
    "is_memory_record",
]

OBSERVATIONS_RECORDED: Final = "om.observations.recorded"
REFLECTIONS_RECORDED: Final = "om.reflections.recorded"
OBSERVATIONS_DROPPED: Final = "om.observations.dropped"
FOLDED_TYPE: Final = "om.folded"
COMPACTION_STRATEGY_NAME = "observational-memory"
MEMORY_RECORD_TYPES = frozenset({OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED, OBSERVATIONS_DROPPED})
SCOPE_RECORD_TYPES = frozenset(
    {
        SCOPE_OPENED,
        SCOPE_CLOSED,
        SCOPE_ENTERED,
        SCOPE_LEFT,
        SCOPE_BOUND,
        SCOPE_UNBOUND,
        SCOPE_GRANTED,
        SCOPE_REVOKED,
    }
)


def is_memory_record(entry: SessionEntry) -> bool:
    """True for the entries that move a branch's memory head (see ``memory_head``).

    ``om.observations.recorded``, ``om.reflections.recorded``, ``om.observations.dropped``
    and compactions whose ``data.memory`` is ``om.folded``; not scope records, plain
    compactions or messages. It reads the marker only: an adapter calls it on entries
    that passed ``validate_memory_record_on_branch`` at append.
    """
    if entry.kind == "message":
        return False
    if entry.kind == "compaction":
        memory = entry.data.get("memory") if entry.data is not None else None
        return isinstance(memory, dict) and memory.get("type") == FOLDED_TYPE
    return entry.custom_type in MEMORY_RECORD_TYPES


Priority = Literal["high", "medium", "low"]
PRIORITY_RANK: dict[str, int] = {"low": 0, "medium": 1, "high": 2}
"""Relevance order of priorities: a lower rank is dropped or trimmed first."""

# The longest entry id SessionEntry accepts; a reference to an entry is held to the same.


def _memory_id(value: str) -> str:
    if not MEMORY_ID_PATTERN.fullmatch(value):
        raise ValueError(f"{value!r} is not a 12-character lowercase hex memory id")
    return value


def _entry_ref(value: str) -> str:
    if not value or len(value) > ENTRY_ID_MAX_CHARS:
        raise ValueError(f"{value!r} is not an entry id (1-{ENTRY_ID_MAX_CHARS} characters)")
    return value


# Item-level types, so a bad id is reported with its index (observationIds[2]).
MemoryId = Annotated[str, AfterValidator(_memory_id)]
EntryRef = Annotated[str, AfterValidator(_entry_ref)]


def _no_duplicates(values: Iterable[str], what: str) -> None:
    # A duplicate inside one record is a malformed record, never a harmless repeat: the
    # fold keys rows by id, so the second copy would silently vanish.
    seen: set[str] = set()
    for value in values:
        if value in seen:
            raise ValueError(f"{what} lists {value!r} twice")
        seen.add(value)


def _iso_datetime(value: str, what: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"{what} {value!r} is not an ISO 8601 date or timestamp") from exc
    return value


class ObservationPayload(WireModel):
    """One observation as a record carries it on the wire.

    Only ``id``, ``text`` and ``sourceEntryIds`` are required: records written by the
    TypeScript package carry only those. Our workers write every field. The fold turns each
    payload into an :class:`Observation`, deriving a missing ``observedAt`` from the newest
    source entry (see :func:`dated_observation`).
    """

    id: MemoryId
    text: str = Field(min_length=1)
    source_entry_ids: list[EntryRef] = Field(min_length=1)
    observed_at: str | None = None
    referenced_date: str | None = None
    priority: Priority = "medium"
    trust: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("source_entry_ids")
    @classmethod
    def _check_sources(cls, value: list[str]) -> list[str]:
        _no_duplicates(value, "sourceEntryIds")
        return value

    @field_validator("observed_at")
    @classmethod
    def _check_observed_at(cls, value: str | None) -> str | None:
        return None if value is None else _iso_datetime(value, "observedAt")

    @field_validator("referenced_date")
    @classmethod
    def _check_referenced_date(cls, value: str | None) -> str | None:
        return None if value is None else _iso_datetime(value, "referencedDate")


class Observation(ObservationPayload):
    """One source-backed fact, dated by its newest source: what the ledger holds."""

    observed_at: str


def _instant(timestamp: str) -> datetime:
    moment = datetime.fromisoformat(timestamp)
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def dated_observation(
    payload: ObservationPayload,
    source_time: Callable[[str], str | None],
    fallback: str,
) -> Observation:
    """``payload`` as an :class:`Observation`, its ``observedAt`` resolved.

    A payload that carries ``observedAt`` keeps it. Otherwise it is the timestamp of the
    newest source entry (``source_time`` maps an entry id to its timestamp, None when not
    known); ``fallback`` (the recording entry's timestamp) only when no source is known.
    Every adapter folds through here, so they all date a record the same way.
    """
    if isinstance(payload, Observation):
        return payload
    fields = dict(payload)
    fields_set = set(payload.model_fields_set)
    if payload.observed_at is None:
        times = [t for t in map(source_time, payload.source_entry_ids) if t is not None]
        fields["observed_at"] = max(times, key=_instant) if times else fallback
        fields_set.add("observed_at")
    # The payload was validated when it was parsed; only the date is new.
    return Observation.model_construct(fields_set, **fields)


class Reflection(WireModel):
    """A higher-level statement resting on observation ids.

    ``supersedesReflectionIds`` (docs/design.md "Supersession of reflections") names
    earlier reflections of the same branch that this one consolidates: they leave the
    active view, stay in the ledger and stay recallable by id.
    """

    id: MemoryId
    text: str = Field(min_length=1)
    observation_ids: list[MemoryId] = Field(min_length=1)
    priority: Priority = "medium"
    trust: str | None = None
    metadata: dict[str, Any] | None = None
    supersedes_reflection_ids: list[MemoryId] | None = None

    @field_validator("observation_ids")
    @classmethod
    def _check_supports(cls, value: list[str]) -> list[str]:
        _no_duplicates(value, "observationIds")
        return value

    @field_validator("supersedes_reflection_ids")
    @classmethod
    def _check_superseded(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            _no_duplicates(value, "supersedesReflectionIds")
        return value

    @model_validator(mode="after")
    def _not_itself(self) -> Reflection:
        if self.supersedes_reflection_ids and self.id in self.supersedes_reflection_ids:
            raise ValueError(f"reflection {self.id!r} lists itself in supersedesReflectionIds")
        return self


class ObservationsRecorded(WireModel):
    """An observer run: new observations (maybe none) and how far it scanned."""

    type: Literal["om.observations.recorded"] = OBSERVATIONS_RECORDED
    observations: list[ObservationPayload] = Field(default_factory=list)
    covers_up_to_id: EntryRef | None = None
    metadata: dict[str, Any] | None = None
    """What the run that wrote the record cost (``metadata.usage``, written and read by
    ``observational_memory.worker_usage``); other implementations' records carry none."""
    skipped_entry_ids: list[EntryRef] | None = None
    """Messages covered without being observed: each failed the observer alone, run after
    run (absent on an ordinary run)."""

    @model_validator(mode="after")
    def _unique_ids(self) -> ObservationsRecorded:
        _no_duplicates((o.id for o in self.observations), "observations")
        return self


class ReflectionsRecorded(WireModel):
    """A reflector run: new reflections (maybe none) and its coverage."""

    type: Literal["om.reflections.recorded"] = REFLECTIONS_RECORDED
    reflections: list[Reflection] = Field(default_factory=list)
    covers_up_to_id: EntryRef | None = None
    metadata: dict[str, Any] | None = None
    """What the run that wrote the record cost (``metadata.usage``, written and read by
    ``observational_memory.worker_usage``); other implementations' records carry none."""

    @model_validator(mode="after")
    def _unique_ids(self) -> ReflectionsRecorded:
        _no_duplicates((r.id for r in self.reflections), "reflections")
        # A reflection is superseded once: two superseders in one record would each claim it.
        _no_duplicates(
            (s for r in self.reflections for s in r.supersedes_reflection_ids or ()),
            "supersedesReflectionIds (across the record's reflections)",
        )
        return self


class ObservationsDropped(WireModel):
    """Observation ids retired by the dropper, or by a revocation (no coverage then)."""

    type: Literal["om.observations.dropped"] = OBSERVATIONS_DROPPED
    observation_ids: list[MemoryId] = Field(default_factory=list)
    covers_up_to_id: EntryRef | None = None
    metadata: dict[str, Any] | None = None
    """What the run that wrote the record cost (``metadata.usage``, written and read by
    ``observational_memory.worker_usage``); other implementations' records carry none."""

    @field_validator("observation_ids")
    @classmethod
    def _check_ids(cls, value: list[str]) -> list[str]:
        _no_duplicates(value, "observationIds")
        return value


class FoldedMemory(WireModel):
    """A compaction's ``data.memory``: what the compaction folded, and what it trimmed."""

    type: Literal["om.folded"] = FOLDED_TYPE
    version: Literal[1] = 1
    full_fold: bool = False
    observations: list[ObservationPayload] = Field(default_factory=list)
    reflections: list[Reflection] = Field(default_factory=list)
    dropped_observation_ids: list[MemoryId] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_ids(self) -> FoldedMemory:
        # Observation and reflection ids share one namespace (recall takes a bare id), and
        # an id cannot be both kept and trimmed by the same compaction.
        _no_duplicates(
            [
                *(o.id for o in self.observations),
                *(r.id for r in self.reflections),
                *self.dropped_observation_ids,
            ],
            "the folded memory (observations, reflections and droppedObservationIds)",
        )
        return self
