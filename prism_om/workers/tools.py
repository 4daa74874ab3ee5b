"""The three worker tools and their validation against what the worker was shown.

``record_observations`` (observer), ``record_reflections`` (reflector) and
``drop_observations`` (dropper). Each recorder collects valid calls; nothing is written
until the run succeeds, when the runtime appends one record. A call that names an entry or
observation the worker was not shown, or breaks the argument shape, raises
``ToolInputError``, which the loop replays to the model as an error result, so the model
can correct itself; the call records nothing (a call is all or nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime
from typing import Any, Final

from ..core.records import Observation, Reflection
from ..entries import SessionEntry
from ..ids import create_memory_id
from ..providers.base import ToolDefinition
from .loop import ToolInputError, WorkerTool

__all__ = [
    "DROP_OBSERVATIONS",
    "RECORD_OBSERVATIONS",
    "RECORD_REFLECTIONS",
    "DropRecorder",
    "ObservationRecorder",
    "ReflectionRecorder",
    "drop_observations_definition",
    "record_observations_definition",
    "record_reflections_definition",
]

RECORD_OBSERVATIONS: Final = "record_observations"
RECORD_REFLECTIONS: Final = "record_reflections"
DROP_OBSERVATIONS: Final = "drop_observations"

_PRIORITIES: Final = ("high", "medium", "low")
_ID_LIST: Final[dict[str, Any]] = {"type": "array", "items": {"type": "string"}, "minItems": 1}

record_observations_definition: Final = ToolDefinition(
    name=RECORD_OBSERVATIONS,
    description=(
        "Record source-backed observations about the conversation shown. Each observation "
        "cites the entry ids it rests on."
    ),
    parameters={
        "type": "object",
        "properties": {
            "observations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string", "description": "One self-contained fact."},
                        "sourceEntryIds": {
                            **_ID_LIST,
                            "description": "Ids of the transcript entries the fact comes from.",
                        },
                        "observedAt": {
                            "type": "string",
                            "description": "ISO 8601 time; default: the newest source's time.",
                        },
                        "referencedDate": {
                            "type": "string",
                            "description": "ISO date a relative date in the source refers to.",
                        },
                        "priority": {"type": "string", "enum": list(_PRIORITIES)},
                    },
                    "required": ["text", "sourceEntryIds"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["observations"],
        "additionalProperties": False,
    },
)

record_reflections_definition: Final = ToolDefinition(
    name=RECORD_REFLECTIONS,
    description="Record higher-level reflections, each resting on the observation ids shown.",
    parameters={
        "type": "object",
        "properties": {
            "reflections": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "text": {"type": "string"},
                        "observationIds": _ID_LIST,
                        "priority": {"type": "string", "enum": list(_PRIORITIES)},
                    },
                    "required": ["text", "observationIds"],
                    "additionalProperties": False,
                },
            }
        },
        "required": ["reflections"],
        "additionalProperties": False,
    },
)

drop_observations_definition: Final = ToolDefinition(
    name=DROP_OBSERVATIONS,
    description="Retire observations (by id, from those shown) that are least worth keeping.",
    parameters={
        "type": "object",
        "properties": {"ids": _ID_LIST},
        "required": ["ids"],
        "additionalProperties": False,
    },
)


def _items(arguments: Mapping[str, Any], key: str) -> list[Any]:
    extra = sorted(set(arguments) - {key})
    if extra:
        raise ToolInputError(f"unexpected argument(s) {extra}; expected only {key!r}")
    items = arguments.get(key)
    if not isinstance(items, list):
        raise ToolInputError(f"{key!r} must be an array")
    return items


def _ids(value: Any, where: str, known: Mapping[str, Any] | set[str], what: str) -> list[str]:
    if not isinstance(value, list) or not value:
        raise ToolInputError(f"{where} must be a non-empty array of ids")
    seen: set[str] = set()
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ToolInputError(f"{where}[{index}] must be a string id")
        if item not in known:
            raise ToolInputError(f"{where}[{index}] = {item!r} is not one of the {what} shown")
        if item in seen:
            raise ToolInputError(f"{where} lists {item!r} twice")
        seen.add(item)
    return list(value)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ToolInputError(f"{where} must be a non-empty string")
    return value.strip()


def _priority(value: Any, where: str) -> str:
    if value is None:
        return "medium"
    if value not in _PRIORITIES:
        raise ToolInputError(f"{where} must be one of {list(_PRIORITIES)}, got {value!r}")
    return str(value)


def _check_keys(item: Mapping[str, Any], allowed: set[str], where: str) -> None:
    extra = sorted(set(item) - allowed)
    if extra:
        raise ToolInputError(f"{where} has unexpected key(s) {extra}; allowed: {sorted(allowed)}")


def _iso(value: Any, where: str, *, date_only: bool = False) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolInputError(f"{where} must be an ISO 8601 string")
    try:
        if date_only and len(value) == 10:
            date.fromisoformat(value)
        else:
            datetime.fromisoformat(value)
    except ValueError:
        raise ToolInputError(f"{where} = {value!r} is not an ISO 8601 date or time") from None
    return value


class ObservationRecorder:
    """``record_observations`` over the message entries one observer run was shown."""

    def __init__(
        self,
        sources: Sequence[SessionEntry],
        *,
        taken_ids: set[str] | None = None,
        mint: Callable[[], str] = create_memory_id,
    ) -> None:
        self.sources = {entry.id: entry for entry in sources}
        self.observations: list[Observation] = []
        self.rejected = 0
        """``record_observations`` calls refused (bad ids, fields): nothing of them kept."""
        self._taken = set(taken_ids or ())
        self._mint = mint

    def handle(self, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            return self._handle(arguments)
        except ToolInputError:
            self.rejected += 1
            raise

    def _handle(self, arguments: dict[str, Any]) -> dict[str, Any]:
        batch: list[Observation] = []
        items = _items(arguments, "observations")
        for index, item in enumerate(items):
            where = f"observations[{index}]"
            if not isinstance(item, dict):
                raise ToolInputError(f"{where} must be an object")
            _check_keys(
                item,
                {"text", "sourceEntryIds", "observedAt", "referencedDate", "priority"},
                where,
            )
            text = _text(item.get("text"), f"{where}.text")
            sources = _ids(
                item.get("sourceEntryIds"), f"{where}.sourceEntryIds", self.sources, "entries"
            )
            observed = _iso(item.get("observedAt"), f"{where}.observedAt")
            if observed is None:
                observed = max((self.sources[s].timestamp for s in sources), key=_instant_key)
            batch.append(
                Observation(
                    id=self._fresh_id(batch),
                    text=text,
                    source_entry_ids=sources,
                    observed_at=observed,
                    referenced_date=_iso(
                        item.get("referencedDate"), f"{where}.referencedDate", date_only=True
                    ),
                    priority=_priority(item.get("priority"), f"{where}.priority"),
                )
            )
        self.observations.extend(batch)
        return {"recorded": [o.id for o in batch]}

    def _fresh_id(self, batch: Sequence[Observation]) -> str:
        taken = {o.id for o in batch}
        while True:
            value = self._mint()
            if value not in taken and value not in self._taken:
                self._taken.add(value)
                return value

    def tool(self) -> WorkerTool:
        return WorkerTool(record_observations_definition, self.handle)


def _instant_key(timestamp: str) -> datetime:
    from ..core.relevance import instant

    return instant(timestamp)


class ReflectionRecorder:
    """``record_reflections`` over the observations one reflector run was shown."""

    def __init__(
        self,
        observation_ids: Sequence[str],
        *,
        taken_ids: set[str] | None = None,
        mint: Callable[[], str] = create_memory_id,
    ) -> None:
        self.shown = set(observation_ids)
        self.reflections: list[Reflection] = []
        self._taken = set(taken_ids or ()) | self.shown
        self._mint = mint

    def handle(self, arguments: dict[str, Any]) -> dict[str, Any]:
        batch: list[Reflection] = []
        for index, item in enumerate(_items(arguments, "reflections")):
            where = f"reflections[{index}]"
            if not isinstance(item, dict):
                raise ToolInputError(f"{where} must be an object")
            _check_keys(item, {"text", "observationIds", "priority"}, where)
            text = _text(item.get("text"), f"{where}.text")
            ids = _ids(
                item.get("observationIds"), f"{where}.observationIds", self.shown, "observations"
            )
            priority = _priority(item.get("priority"), f"{where}.priority")
            new_id = self._mint()
            while new_id in self._taken:
                new_id = self._mint()
            self._taken.add(new_id)
            batch.append(Reflection(id=new_id, text=text, observation_ids=ids, priority=priority))
        self.reflections.extend(batch)
        return {"recorded": [r.id for r in batch]}

    def tool(self) -> WorkerTool:
        return WorkerTool(record_reflections_definition, self.handle)


class DropRecorder:
    """``drop_observations`` over the observations one dropper run was shown."""

    def __init__(self, observation_ids: Sequence[str]) -> None:
        self.shown = set(observation_ids)
        self.dropped: list[str] = []

    def handle(self, arguments: dict[str, Any]) -> dict[str, Any]:
        ids = _ids(_items_value(arguments), "ids", self.shown, "observations")
        again = [i for i in ids if i in self.dropped]
        if again:
            raise ToolInputError(f"already dropped in this run: {again}")
        self.dropped.extend(ids)
        return {"dropped": ids}

    def tool(self) -> WorkerTool:
        return WorkerTool(drop_observations_definition, self.handle)


def _items_value(arguments: Mapping[str, Any]) -> Any:
    extra = sorted(set(arguments) - {"ids"})
    if extra:
        raise ToolInputError(f"unexpected argument(s) {extra}; expected only 'ids'")
    return arguments.get("ids")
