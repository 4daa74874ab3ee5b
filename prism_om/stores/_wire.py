"""Wire dicts of stored entries and observations, serialised in Rust alone.

``SessionEntry.to_wire()`` and ``Observation.model_dump(by_alias=True, mode="json")``
run ``WireModel._drop_absent``, a Python wrap step, once per model: most of the cost of
a recall's answer. For the shapes where ``exclude_none=True`` drops exactly what that
step drops (every nullable field optional, none kept when None: see
``_rows._message_serializer``), the models' own serializers less that step give the
same dict; any other shape takes the models' own path.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic_core import SchemaSerializer

from ..core.records import Observation
from ..entries import SessionEntry
from ._rows import _DATA, _message_serializer, _without_drop_absent

__all__ = ["entry_wire", "observation_wire"]


@functools.cache
def _observation_serializer() -> SchemaSerializer:
    return SchemaSerializer(_without_drop_absent(Observation.__pydantic_core_schema__))


def entry_wire(entry: SessionEntry) -> dict[str, Any]:
    """``entry.to_wire()``: a message entry's envelope around its message serialised in
    Rust (a message entry carries no ``summary``; its ``data``, from schema version 7,
    follows the message as in the model's own field order); other kinds as they are."""
    message = entry.message
    if message is None:
        return entry.to_wire()
    wire = {
        "id": entry.id,
        "sessionId": entry.session_id,
        "parentId": entry.parent_id,  # kept when None: the root's
        "kind": entry.kind,
        "timestamp": entry.timestamp,
        "message": _message_serializer().to_python(
            message, by_alias=True, exclude_none=True, mode="json"
        ),
    }
    if entry.data is not None:
        wire["data"] = _DATA.dump_python(entry.data, mode="json")
    return wire


def observation_wire(observation: Observation) -> dict[str, Any]:
    """``observation.model_dump(by_alias=True, mode="json")``."""
    if type(observation) is not Observation:
        return observation.model_dump(by_alias=True, mode="json")
    wire: dict[str, Any] = _observation_serializer().to_python(
        observation, by_alias=True, exclude_none=True, mode="json"
    )
    return wire
