"""The ``om.folded`` details a compaction stores in ``data.memory``, and their byte size.

Secrets are redacted from the free-text fields (``text``, ``trust``, ``metadata``) of the
folded copies. Ids, source entry ids and timestamps are structure, not prose, and stay as
they are: redacting them would break the references the fold and recall follow.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from ..core.projection import (
    ObservationalMemoryProjection,
    build_observational_memory_projection_from_entries,
)
from ..core.records import FoldedMemory, Observation, Reflection
from ..core.redaction import Redactor, redactor
from ..core.text_caps import utf8_len
from ..entries import SessionEntry
from ..errors import InvalidInputError

__all__ = [
    "create_folded_memory_details",
    "folded_payload_bytes",
    "redact_memory_item",
]

_Item = TypeVar("_Item", Observation, Reflection)


def redact_memory_item(item: _Item, secrets: Iterable[str] | Redactor | None) -> _Item:
    """A copy of an observation or reflection with its free text redacted."""
    red = redactor(secrets)
    if not red:
        return item
    update: dict[str, Any] = {"text": red.text(item.text)}
    if item.trust is not None:
        update["trust"] = red.text(item.trust)
    if item.metadata is not None:
        update["metadata"] = red.value(item.metadata)
    return item.model_copy(update=update)


def folded_payload_bytes(details: FoldedMemory | dict[str, Any]) -> int:
    """UTF-8 size of the details (or any JSON value) as compact JSON: what 512 KiB caps."""
    data = (
        details.model_dump(by_alias=True, mode="json")
        if isinstance(details, FoldedMemory)
        else details
    )
    return utf8_len(json.dumps(data, ensure_ascii=False, separators=(",", ":")))


def create_folded_memory_details(
    source: ObservationalMemoryProjection | Sequence[SessionEntry],
    *,
    full_fold: bool = False,
    dropped_observation_ids: Iterable[str] = (),
    invalidated_ids: Iterable[str] | None = None,
    secrets: Iterable[str] | Redactor | None = None,
) -> dict[str, Any]:
    """The ``data.memory`` JSON of a compaction: the active memory, minus trimmed ids.

    ``dropped_observation_ids`` are the observations this compaction trims; they leave
    ``observations`` and are listed in ``droppedObservationIds``, which the fold treats as
    dropped from then on. ``invalidated_ids`` applies only when ``source`` is entries (a
    projection is already filtered).
    """
    projection = (
        source
        if isinstance(source, ObservationalMemoryProjection)
        else build_observational_memory_projection_from_entries(
            source, invalidated_ids=invalidated_ids
        )
    )
    red = redactor(secrets)
    trimmed = list(dict.fromkeys(dropped_observation_ids))
    gone = set(trimmed)
    active = {o.id for o in projection.active_observations}
    for observation_id in trimmed:
        if observation_id not in active:
            raise InvalidInputError(
                f"dropped observation id {observation_id!r} is not an active observation"
            )
    folded = FoldedMemory(
        full_fold=full_fold,
        observations=[
            redact_memory_item(o, red) for o in projection.active_observations if o.id not in gone
        ],
        reflections=[redact_memory_item(r, red) for r in projection.active_reflections],
        dropped_observation_ids=trimmed,
    )
    return folded.model_dump(by_alias=True, mode="json")
