"""Read the memory record an entry carries, if any: the one parser the fold and validation share.

An entry carries a memory record when it is a custom entry whose ``data.type`` is one of the
``om.*`` record types, or a compaction entry whose ``data.memory.type`` is ``om.folded``.
The wire is checked strictly: camelCase keys only, no unknown keys, no type coercion, so
every adapter accepts exactly the same payloads.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias, TypeVar

from pydantic import BaseModel, ValidationError

from ..entries import SessionEntry
from ..errors import MemoryRecordError
from .records import (
    FOLDED_TYPE,
    OBSERVATIONS_DROPPED,
    OBSERVATIONS_RECORDED,
    REFLECTIONS_RECORDED,
    SCOPE_RECORD_TYPES,
    FoldedMemory,
    ObservationsDropped,
    ObservationsRecorded,
    ReflectionsRecorded,
)

__all__ = [
    "MEMORY_TYPE_PREFIX",
    "MemoryRecord",
    "folded_memory_of",
    "parse_memory_record",
]

MEMORY_TYPE_PREFIX: Final = "om."

MemoryRecord: TypeAlias = (
    ObservationsRecorded | ReflectionsRecorded | ObservationsDropped | FoldedMemory
)

_M = TypeVar("_M", bound=BaseModel)

_MODELS: Final[
    dict[str, type[ObservationsRecorded | ReflectionsRecorded | ObservationsDropped]]
] = {
    OBSERVATIONS_RECORDED: ObservationsRecorded,
    REFLECTIONS_RECORDED: ReflectionsRecorded,
    OBSERVATIONS_DROPPED: ObservationsDropped,
}


def parse_memory_record(entry: SessionEntry) -> MemoryRecord | None:
    """The memory record ``entry`` carries, or None when it carries none.

    None for messages, for custom entries outside the ``om.`` namespace, for ``om.scope.*``
    records (the work-scope index validates those) and for compactions whose
    ``data.memory`` is absent or not ``om.folded``. Raises ``MemoryRecordError`` for a
    malformed record and for an unknown ``om.*`` custom type: the namespace is reserved,
    so a misspelt marker fails closed instead of being stored as an inert entry.
    """
    if entry.kind == "compaction":
        return folded_memory_of(entry)
    marker = entry.custom_type
    if marker is None or not marker.startswith(MEMORY_TYPE_PREFIX):
        return None
    if marker in SCOPE_RECORD_TYPES:
        return None
    model = _MODELS.get(marker)
    if model is None:
        hint = (
            f"{FOLDED_TYPE!r} belongs in a compaction's data.memory"
            if marker == FOLDED_TYPE
            else f"known types: {', '.join(sorted(_MODELS))}, om.scope.*"
        )
        raise MemoryRecordError(
            f"entry {entry.id!r}: unknown memory record type {marker!r} ({hint})",
            entry_id=entry.id,
            session_id=entry.session_id,
        )
    return _validate(model, entry.data, entry, marker, "data")


def folded_memory_of(entry: SessionEntry) -> FoldedMemory | None:
    """The ``om.folded`` details of a compaction entry, or None when it has none."""
    if entry.kind != "compaction" or entry.data is None:
        return None
    memory = entry.data.get("memory")
    if not isinstance(memory, dict) or memory.get("type") != FOLDED_TYPE:
        return None
    return _validate(FoldedMemory, memory, entry, FOLDED_TYPE, "data.memory")


def _validate(model: type[_M], data: Any, entry: SessionEntry, marker: str, where: str) -> _M:
    try:
        return model.model_validate(data, strict=True, by_alias=True, by_name=False)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = _field_path(where, first["loc"])
        memory_id = _memory_id_at(first["loc"], first.get("input"))
        quoted = "" if memory_id is None else f" {memory_id!r}"
        raise MemoryRecordError(
            f"entry {entry.id!r} ({marker}): {field}{quoted}: {first['msg']}",
            entry_id=entry.id,
            session_id=entry.session_id,
            memory_id=memory_id,
        ) from None


# The wire fields that hold memory ids: a record's own ``id`` and the lists that cite them.
_MEMORY_ID_LISTS = frozenset({"observationIds", "droppedObservationIds"})


def _memory_id_at(loc: tuple[int | str, ...], value: object) -> str | None:
    """The malformed memory id a validation error is about, or None for another field."""
    if not isinstance(value, str) or not loc:
        return None
    if loc[-1] == "id" or (len(loc) >= 2 and loc[-2] in _MEMORY_ID_LISTS):
        return value
    return None


def _field_path(where: str, loc: tuple[int | str, ...]) -> str:
    path = where
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path
