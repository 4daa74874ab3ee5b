"""The ``om.*`` custom-entry records and their payloads, on the specification's wire names."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import Field, field_validator

from ..entries import WireModel
from ..ids import MEMORY_ID_PATTERN

__all__ = [
    "COMPACTION_STRATEGY_NAME",
    "FOLDED_TYPE",
    "MEMORY_RECORD_TYPES",
    "OBSERVATIONS_DROPPED",
    "OBSERVATIONS_RECORDED",
    "REFLECTIONS_RECORDED",
    "SCOPE_RECORD_TYPES",
    "FoldedMemory",
    "Observation",
    "ObservationsDropped",
    "ObservationsRecorded",
    "Priority",
    "Reflection",
    "ReflectionsRecorded",
]

OBSERVATIONS_RECORDED: Final = "om.observations.recorded"
REFLECTIONS_RECORDED: Final = "om.reflections.recorded"
OBSERVATIONS_DROPPED: Final = "om.observations.dropped"
FOLDED_TYPE: Final = "om.folded"
COMPACTION_STRATEGY_NAME = "observational-memory"
MEMORY_RECORD_TYPES = frozenset({OBSERVATIONS_RECORDED, REFLECTIONS_RECORDED, OBSERVATIONS_DROPPED})
SCOPE_RECORD_TYPES = frozenset(
    {
        "om.scope.opened",
        "om.scope.closed",
        "om.scope.entered",
        "om.scope.left",
        "om.scope.bound",
        "om.scope.unbound",
        "om.scope.granted",
        "om.scope.revoked",
    }
)

Priority = Literal["high", "medium", "low"]
PRIORITY_RANK: dict[str, int] = {"low": 0, "medium": 1, "high": 2}


def _memory_id(value: str) -> str:
    if not MEMORY_ID_PATTERN.fullmatch(value):
        raise ValueError(f"{value!r} is not a 12-character lowercase hex memory id")
    return value


class Observation(WireModel):
    """One source-backed fact, dated by its newest source."""

    id: str
    text: str = Field(min_length=1)
    source_entry_ids: list[str] = Field(min_length=1)
    observed_at: str
    referenced_date: str | None = None
    priority: Priority = "medium"
    trust: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return _memory_id(value)


class Reflection(WireModel):
    """A higher-level statement resting on observation ids."""

    id: str
    text: str = Field(min_length=1)
    observation_ids: list[str] = Field(min_length=1)
    priority: Priority = "medium"
    trust: str | None = None
    metadata: dict[str, Any] | None = None

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        return _memory_id(value)

    @field_validator("observation_ids")
    @classmethod
    def _check_supports(cls, value: list[str]) -> list[str]:
        return [_memory_id(v) for v in value]


class ObservationsRecorded(WireModel):
    type: Literal["om.observations.recorded"] = OBSERVATIONS_RECORDED
    observations: list[Observation] = Field(default_factory=list)
    covers_up_to_id: str | None = None


class ReflectionsRecorded(WireModel):
    type: Literal["om.reflections.recorded"] = REFLECTIONS_RECORDED
    reflections: list[Reflection] = Field(default_factory=list)
    covers_up_to_id: str | None = None


class ObservationsDropped(WireModel):
    type: Literal["om.observations.dropped"] = OBSERVATIONS_DROPPED
    observation_ids: list[str] = Field(default_factory=list)
    covers_up_to_id: str | None = None

    @field_validator("observation_ids")
    @classmethod
    def _check_ids(cls, value: list[str]) -> list[str]:
        return [_memory_id(v) for v in value]


class FoldedMemory(WireModel):
    """A compaction's ``data.memory``: what the compaction folded, and what it trimmed."""

    type: Literal["om.folded"] = FOLDED_TYPE
    version: Literal[1] = 1
    full_fold: bool = False
    observations: list[Observation] = Field(default_factory=list)
    reflections: list[Reflection] = Field(default_factory=list)
    dropped_observation_ids: list[str] = Field(default_factory=list)
