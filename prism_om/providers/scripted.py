"""``ScriptedProvider``: a test double that replays scripted turns and records requests.

Each call to ``generate`` plays the next scripted turn. A turn is a list of events or
of short dicts::

    ScriptedProvider([
        [{"tool_call": {"name": "record_observations", "arguments": {"observations": []}}}],
        [{"text": "nothing more to record"}],
    ])

Dict forms: ``{"text": str}``, ``{"thinking": str}``,
``{"tool_call": {"name": str, "arguments": dict | str, "id": str (optional)}}``,
``{"done": stop_reason}`` or ``{"done": {"stop_reason": ..., "usage": ...}}`` and
``{"error": message}`` (raises ``ProviderError`` at that point of the stream). An
exception instance in a turn is raised where it stands. A turn may also be a callable
``(request) -> list`` (or an async one) that computes the reply from the request.

A turn without a ``DoneEvent`` gets one: ``"tool_calls"`` when it made a call, else
``"stop"``. Tool calls without an id get ``call_{turn}_{n}``, stable across runs.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Iterable,
    Mapping,
    Sequence,
)
from typing import Any, Literal, TypeAlias

from ..errors import InvalidInputError
from .base import (
    DoneEvent,
    ProviderError,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)

__all__ = ["ScriptExhaustedError", "ScriptedItem", "ScriptedProvider", "ScriptedTurn"]

ScriptedItem: TypeAlias = ProviderEvent | Mapping[str, Any] | BaseException
ScriptedTurn: TypeAlias = (
    Sequence[ScriptedItem]
    | Callable[[ProviderRequest], Sequence[ScriptedItem] | Awaitable[Sequence[ScriptedItem]]]
)

_EVENT_TYPES = (TextEvent, ThinkingEvent, ToolCallEvent, DoneEvent)


class ScriptExhaustedError(ProviderError):
    """``generate`` was called for more turns than were scripted."""


class ScriptedProvider:
    """Replays scripted turns in order; every request it saw is kept in ``requests``.

    ``then`` says what happens after the last turn: ``"error"`` raises
    ``ScriptExhaustedError``; ``"stop"`` answers with a bare ``DoneEvent("stop")``, a
    turn without tool calls, which a worker treats as nothing to record.
    """

    def __init__(
        self,
        responses: Iterable[ScriptedTurn] = (),
        *,
        then: Literal["error", "stop"] = "error",
        provider_id: str = "scripted",
    ) -> None:
        if then not in ("error", "stop"):
            raise InvalidInputError(f"then must be 'error' or 'stop', not {then!r}")
        self.provider_id = provider_id
        self.then = then
        self.requests: list[ProviderRequest] = []
        # Static turns are checked now, so a typo in a test fails where it is written.
        self._turns: list[ScriptedTurn] = [
            t if callable(t) else [_check_item(item) for item in t] for t in responses
        ]

    @property
    def remaining(self) -> int:
        """Scripted turns not played yet."""
        return max(len(self._turns) - len(self.requests), 0)

    def add(self, *turns: ScriptedTurn) -> None:
        """Append more turns to the script."""
        for turn in turns:
            self._turns.append(turn if callable(turn) else [_check_item(i) for i in turn])

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        """Record ``request`` and play the next turn."""
        self.requests.append(request)
        number = len(self.requests)
        if number > len(self._turns):
            if self.then == "error":
                raise ScriptExhaustedError(
                    f"ScriptedProvider: turn {number} was requested but only "
                    f"{len(self._turns)} turn(s) were scripted",
                    provider_id=self.provider_id,
                )
            yield DoneEvent("stop")
            return
        turn = self._turns[number - 1]
        if callable(turn):
            produced = turn(request)
            if inspect.isawaitable(produced):
                produced = await produced
            items: Sequence[ScriptedItem] = [_check_item(i) for i in produced]
        else:
            items = turn
        made_call = False
        calls = 0
        for item in items:
            if isinstance(item, BaseException):
                raise item
            event = _to_event(item, number, calls, self.provider_id)
            if isinstance(event, ToolCallEvent):
                made_call = True
                calls += 1
            yield event
            if isinstance(event, DoneEvent):
                return
        yield DoneEvent("tool_calls" if made_call else "stop")

    async def aclose(self) -> None:
        """Nothing to release; here so it can stand in for a real provider."""

    async def __aenter__(self) -> ScriptedProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def _check_item(item: object) -> ScriptedItem:
    """Validate one scripted item early; dict forms are converted when played."""
    if isinstance(item, (*_EVENT_TYPES, BaseException)):
        return item
    if not isinstance(item, Mapping) or len(item) != 1:
        raise TypeError(f"a scripted item is an event or a one-key dict, not {item!r}")
    ((key, value),) = item.items()
    if key in ("text", "thinking", "error"):
        if not isinstance(value, str):
            raise TypeError(f"scripted {key!r} needs a string, not {value!r}")
    elif key == "tool_call":
        if not isinstance(value, Mapping) or not isinstance(value.get("name"), str):
            raise TypeError(f"scripted 'tool_call' needs a dict with a 'name', not {value!r}")
        arguments = value.get("arguments", {})
        if not isinstance(arguments, str | Mapping):
            raise TypeError(f"tool-call arguments must be a dict or JSON text: {arguments!r}")
        unknown = set(value) - {"name", "arguments", "id"}
        if unknown:
            raise TypeError(f"unknown scripted tool_call key(s): {sorted(unknown)}")
    elif key == "done":
        if not (value is None or isinstance(value, str | Mapping)):
            raise TypeError(f"scripted 'done' needs a stop reason or a dict, not {value!r}")
    else:
        raise TypeError(f"unknown scripted item {key!r}")
    return item


def _to_event(
    item: ProviderEvent | Mapping[str, Any], turn: int, index: int, provider_id: str
) -> ProviderEvent:
    if isinstance(item, _EVENT_TYPES):
        return item
    assert isinstance(item, Mapping)
    ((key, value),) = item.items()
    if key == "text":
        return TextEvent(value)
    if key == "thinking":
        return ThinkingEvent(value)
    if key == "error":
        raise ProviderError(value, provider_id=provider_id)
    if key == "done":
        if isinstance(value, Mapping):
            return DoneEvent(value.get("stop_reason", "stop"), value.get("usage"))
        return DoneEvent(value)
    arguments = value.get("arguments", {})
    if not isinstance(arguments, str):
        # Keep non-ASCII as the model would write it: byte limits see the real size.
        arguments = json.dumps(arguments, ensure_ascii=False)
    return ToolCallEvent(
        id=value.get("id") or f"call_{turn}_{index}",
        name=value["name"],
        arguments=arguments,
    )
