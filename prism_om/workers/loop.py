"""The tool-only worker loop: provider turns, tool calls and every worker limit.

One run is a conversation of at most ``max_worker_turns`` provider turns. Each turn is
read through ``event_stream`` so that stopping early (a broken limit) closes the stream.
Text, thinking and done events are ignored; a turn without a tool call ends the run as a
success. A turn's calls are checked in full before any of them executes:

1. while streaming: the tool name is registered, the per-turn and per-run call caps hold,
   the raw argument text is within ``max_worker_argument_bytes``;
2. after the stream: every argument text is a JSON object, at most ``MAX_JSON_DEPTH``
   deep, and still within the byte cap once secrets are redacted;
3. the assistant message (with the redacted calls) still fits ``max_worker_message_bytes``.

Only then do the calls execute, in order. Each result must be JSON (not cyclic, not too
deep) and within ``max_worker_result_bytes`` before and after redaction; a tool's own
input error becomes an error result (bounded by ``max_worker_error_bytes``) that the model
sees on its next turn. The transcript replays the assistant message with its calls, then
one ``tool`` message per call with the matching ``tool_call_id``.

Any broken limit raises :class:`WorkerRunError` (a ``WorkerError``) with a ``reason``;
nothing of that turn executes or enters the transcript. Calls of the final allowed turn
execute, and no further turn starts.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from ..core.limits import MemoryWorkerLimits
from ..core.redaction import Redactor
from ..entries import sanitize_surrogates_value
from ..errors import InvalidInputError, WorkerRunError
from ..observational_memory.worker_usage import current_meter
from ..providers.base import (
    DoneEvent,
    Provider,
    ProviderMessage,
    ProviderRequest,
    ProviderToolCall,
    ToolCallEvent,
    ToolDefinition,
    bound_error_text,
    event_stream,
)

__all__ = [
    "MAX_JSON_DEPTH",
    "RequestSettings",
    "ToolInputError",
    "WorkerRun",
    "WorkerRunError",
    "WorkerTool",
    "check_json_value",
    "json_bytes",
    "message_bytes",
    "run_worker",
]

MAX_JSON_DEPTH: Final = 32
"""Deepest nesting of objects/arrays accepted in tool arguments and results."""

WorkerFailure = Literal[
    "unknown_tool",
    "tool_calls_per_turn",
    "tool_calls",
    "argument_bytes",
    "argument_json",
    "argument_depth",
    "result_bytes",
    "result_json",
    "result_depth",
    "result_cycle",
    "message_bytes",
    "provider_error",
    "tool_failed",
]


class ToolInputError(InvalidInputError):
    """A tool call the worker's input does not support; replayed to the model as an error."""


@dataclass(frozen=True, slots=True)
class WorkerTool:
    """A registered worker tool: its definition and a handler over parsed arguments."""

    definition: ToolDefinition
    handler: Callable[[dict[str, Any]], Any]

    @property
    def name(self) -> str:
        return self.definition.name


@dataclass(frozen=True, slots=True)
class RequestSettings:
    """The request fields every turn of one run shares."""

    model: str | None = None
    thinking_level: str | None = None
    correlation_id: str | None = None
    max_output_tokens: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class WorkerRun:
    """What one run did: provider turns started, tool calls executed, why it stopped."""

    turns: int
    tool_calls: int
    stopped: Literal["no_tool_call", "max_turns"]
    messages: tuple[ProviderMessage, ...] = ()


def json_bytes(value: Any) -> int:
    """UTF-8 bytes of ``value`` as compact JSON."""
    return len(_dumps(value).encode("utf-8"))


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def check_json_value(value: Any, *, what: str, max_depth: int = MAX_JSON_DEPTH) -> str | None:
    """None when ``value`` is plain JSON within ``max_depth``; else the failure reason.

    Returns ``"depth"``, ``"cycle"`` or ``"json"`` (a non-JSON type, a non-string key, a
    non-finite float).
    """
    active: set[int] = set()

    def walk(item: Any, depth: int) -> str | None:
        if item is None or isinstance(item, bool | str | int):
            return None
        if isinstance(item, float):
            return None if math.isfinite(item) else "json"
        if isinstance(item, dict | list | tuple):
            if id(item) in active:
                return "cycle"
            if depth > max_depth:
                return "depth"
            active.add(id(item))
            try:
                if isinstance(item, dict):
                    for key, inner in item.items():
                        if not isinstance(key, str):
                            return "json"
                        problem = walk(inner, depth + 1)
                        if problem:
                            return problem
                else:
                    for inner in item:
                        problem = walk(inner, depth + 1)
                        if problem:
                            return problem
            finally:
                active.discard(id(item))
            return None
        return "json"

    return walk(value, 1)


def message_bytes(message: ProviderMessage) -> int:
    """UTF-8 bytes one transcript message adds: content, calls, call id."""
    total = len(message.content.encode("utf-8"))
    for call in message.tool_calls:
        total += len(call.id.encode("utf-8"))
        total += len(call.name.encode("utf-8"))
        total += len(call.arguments.encode("utf-8"))
    if message.tool_call_id:
        total += len(message.tool_call_id.encode("utf-8"))
    return total


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


class _Limits:
    """The resolved limits plus the redactor, with the failure helper."""

    def __init__(
        self,
        limits: MemoryWorkerLimits,
        redactor: Redactor,
        on_sanitized: Callable[[int], None] | None = None,
    ) -> None:
        self.limits = limits
        self.redactor = redactor
        self._on_sanitized = on_sanitized

    def sanitized(self, replaced: int) -> None:
        if replaced and self._on_sanitized is not None:
            self._on_sanitized(replaced)

    def error_text(self, text: str) -> str:
        return bound_error_text(self.redactor.text(text), (), self.limits.max_worker_error_bytes)

    def fail(self, reason: str, message: str) -> WorkerRunError:
        return WorkerRunError(reason, self.error_text(message))


async def run_worker(
    *,
    provider: Provider,
    system: str,
    prompt: str,
    tools: Sequence[WorkerTool],
    limits: MemoryWorkerLimits,
    redactor: Redactor | None = None,
    request: RequestSettings | None = None,
    on_sanitized: Callable[[int], None] | None = None,
) -> WorkerRun:
    """Run the tool-only loop until a turn makes no call or the turn limit is reached.

    Raises ``WorkerRunError`` for every broken limit and for a failing provider (its error
    redacted and bounded); the caller persists nothing then. Lone surrogates in a call
    (raw, or as JSON escapes) become U+FFFD, and ``on_sanitized`` hears how many.
    """
    checks = _Limits(limits, redactor or Redactor(), on_sanitized)
    settings = request or RequestSettings()
    meter = current_meter()
    if meter is not None:
        meter.run()
    registry = {tool.name: tool for tool in tools}
    definitions = tuple(tool.definition for tool in tools)
    system = checks.redactor.text(system)
    messages: list[ProviderMessage] = [ProviderMessage("user", checks.redactor.text(prompt))]
    cap = limits.max_worker_message_bytes
    used = len(system.encode("utf-8")) + message_bytes(messages[0])
    if used > cap:
        raise checks.fail(
            "message_bytes",
            f"worker prompt is {used} bytes, above max_worker_message_bytes = {cap}",
        )
    total_calls = 0
    turns = 0
    while turns < limits.max_worker_turns:
        turns += 1
        provider_request = ProviderRequest(
            system=system,
            messages=messages,
            tools=definitions,
            model=settings.model,
            thinking_level=settings.thinking_level,
            correlation_id=settings.correlation_id,
            max_output_tokens=settings.max_output_tokens,
            options=settings.options,
        )
        events = await _read_turn(provider, provider_request, registry, checks, total_calls)
        if not events:
            return WorkerRun(turns, total_calls, "no_tool_call", tuple(messages))
        parsed = [_parse_arguments(event, checks) for event in events]
        assistant = ProviderMessage(
            "assistant",
            tool_calls=[
                ProviderToolCall(id=event.id, name=event.name, arguments=replay)
                for event, (_, replay) in zip(events, parsed, strict=True)
            ],
        )
        used += message_bytes(assistant)
        if used > cap:
            raise checks.fail(
                "message_bytes",
                f"worker transcript would reach {used} bytes with turn {turns}'s calls, "
                f"above max_worker_message_bytes = {cap}",
            )
        replies: list[ProviderMessage] = []
        for event, (arguments, _) in zip(events, parsed, strict=True):
            content = _execute(registry[event.name], event, arguments, checks)
            reply = ProviderMessage("tool", content=content, tool_call_id=event.id, name=event.name)
            used += message_bytes(reply)
            if used > cap:
                raise checks.fail(
                    "message_bytes",
                    f"worker transcript would reach {used} bytes with the result of call "
                    f"{event.id!r}, above max_worker_message_bytes = {cap}",
                )
            replies.append(reply)
        total_calls += len(events)
        messages.append(assistant)
        messages.extend(replies)
    return WorkerRun(turns, total_calls, "max_turns", tuple(messages))


async def _read_turn(
    provider: Provider,
    request: ProviderRequest,
    registry: Mapping[str, WorkerTool],
    checks: _Limits,
    calls_before: int,
) -> list[ToolCallEvent]:
    limits = checks.limits
    calls: list[ToolCallEvent] = []
    reported: Mapping[str, Any] | None = None
    meter = current_meter()
    try:
        async with event_stream(provider, request) as events:
            async for event in events:
                if isinstance(event, DoneEvent):
                    reported = event.usage
                    continue
                if not isinstance(event, ToolCallEvent):
                    continue
                event = _storable_call(event, checks)
                if event.name not in registry:
                    raise checks.fail(
                        "unknown_tool",
                        f"the model called unknown tool {event.name!r}; registered: "
                        f"{', '.join(sorted(registry))}",
                    )
                if len(calls) >= limits.max_worker_tool_calls_per_turn:
                    raise checks.fail(
                        "tool_calls_per_turn",
                        "the model made more than max_worker_tool_calls_per_turn = "
                        f"{limits.max_worker_tool_calls_per_turn} calls in one turn",
                    )
                if calls_before + len(calls) >= limits.max_worker_tool_calls:
                    raise checks.fail(
                        "tool_calls",
                        "the model made more than max_worker_tool_calls = "
                        f"{limits.max_worker_tool_calls} calls in one run",
                    )
                size = len(event.arguments.encode("utf-8"))
                if size > limits.max_worker_argument_bytes:
                    raise checks.fail(
                        "argument_bytes",
                        f"call {event.id!r} to {event.name!r} has {size} bytes of arguments, "
                        f"above max_worker_argument_bytes = {limits.max_worker_argument_bytes}",
                    )
                calls.append(event)
    except WorkerRunError:
        if meter is not None:  # the turn was paid for even though its calls are refused
            meter.turn(reported, _estimate(request, calls))
        raise
    except Exception as exc:
        if meter is not None:  # the request was sent: its input is counted, by estimate
            meter.turn(None, (_estimate(request, calls)[0], 0))
        raise checks.fail("provider_error", f"worker provider failed: {exc}") from exc
    if meter is not None:
        meter.turn(reported, _estimate(request, calls))
    return calls


def _estimate(request: ProviderRequest, calls: Sequence[ToolCallEvent]) -> tuple[int, int]:
    """Our own count of a turn's (input, output) tokens, for a provider that gives none:
    the request counted as ``host.context.estimate_request_tokens`` counts it (a layer
    above this one), line by line so the repeated prompt is encoded once."""
    from ..tokens import MESSAGE_OVERHEAD_TOKENS, get_estimator

    est = get_estimator()
    sent = est.count_lines(request.system)
    for message in request.messages:
        sent += est.count_lines(message.content) + MESSAGE_OVERHEAD_TOKENS
        for call in message.tool_calls:
            sent += est.count_lines(call.name) + est.count_lines(call.arguments)
    if request.tools:
        definitions = [
            {"name": t.name, "description": t.description, "parameters": dict(t.parameters)}
            for t in request.tools
        ]
        sent += est.count_lines(json.dumps(definitions, ensure_ascii=False, sort_keys=True))
    out = sum(est.count(c.name) + est.count(c.arguments) for c in calls)
    return sent, out


def _storable_call(event: ToolCallEvent, checks: _Limits) -> ToolCallEvent:
    """``event`` with lone surrogates (which no UTF-8 request or store can carry) replaced."""
    (call_id, name, arguments), replaced = sanitize_surrogates_value(
        (event.id, event.name, event.arguments)
    )
    if not replaced:
        return event
    checks.sanitized(replaced)
    return ToolCallEvent(id=call_id, name=name, arguments=arguments)


def _parse_arguments(event: ToolCallEvent, checks: _Limits) -> tuple[dict[str, Any], str]:
    """The call's arguments (redacted) and the text replayed for them."""
    try:
        value = json.loads(event.arguments, parse_constant=_reject_constant)
    except RecursionError:
        raise checks.fail(
            "argument_depth",
            f"call {event.id!r} to {event.name!r} nests its arguments deeper than "
            f"{MAX_JSON_DEPTH} levels",
        ) from None
    except ValueError as exc:
        raise checks.fail(
            "argument_json", f"call {event.id!r} to {event.name!r} has non-JSON arguments: {exc}"
        ) from None
    if not isinstance(value, dict):
        raise checks.fail(
            "argument_json",
            f"call {event.id!r} to {event.name!r}: arguments must be a JSON object, "
            f"got {type(value).__name__}",
        )
    # A JSON escape can still spell half a surrogate pair; memory records must be storable.
    value, replaced = sanitize_surrogates_value(value)
    checks.sanitized(replaced)
    problem = check_json_value(value, what="arguments")
    if problem is not None:
        raise checks.fail(
            f"argument_{problem}",
            f"call {event.id!r} to {event.name!r} nests its arguments deeper than "
            f"{MAX_JSON_DEPTH} levels",
        )
    redacted = checks.redactor.value(value)
    replay = event.arguments if redacted == value else _dumps(redacted)
    size = len(replay.encode("utf-8"))
    if size > checks.limits.max_worker_argument_bytes:
        raise checks.fail(
            "argument_bytes",
            f"call {event.id!r} to {event.name!r} has {size} bytes of redacted arguments, "
            f"above max_worker_argument_bytes = {checks.limits.max_worker_argument_bytes}",
        )
    return redacted, replay


def _execute(
    tool: WorkerTool, event: ToolCallEvent, arguments: dict[str, Any], checks: _Limits
) -> str:
    cap = checks.limits.max_worker_result_bytes
    try:
        value = tool.handler(arguments)
    except ToolInputError as exc:
        payload: dict[str, Any] = {"ok": False, "error": checks.error_text(str(exc))}
    except Exception as exc:
        raise checks.fail("tool_failed", f"tool {tool.name!r} failed: {exc}") from exc
    else:
        problem = check_json_value(value, what="result")
        if problem is not None:
            words = {"depth": f"nests deeper than {MAX_JSON_DEPTH} levels", "cycle": "is cyclic"}
            raise checks.fail(
                f"result_{problem}",
                f"tool {tool.name!r} returned a result that {words.get(problem, 'is not JSON')}",
            )
        size = json_bytes(value)
        if size > cap:
            raise checks.fail(
                "result_bytes",
                f"tool {tool.name!r} returned {size} bytes, above max_worker_result_bytes = {cap}",
            )
        payload = {"ok": True, "value": checks.redactor.value(value)}
    content = _dumps(payload)
    size = len(content.encode("utf-8"))
    if size > cap:
        raise checks.fail(
            "result_bytes",
            f"tool {tool.name!r} replay is {size} bytes after redaction, "
            f"above max_worker_result_bytes = {cap}",
        )
    return content


def iter_tool_calls(messages: Iterable[ProviderMessage]) -> Iterable[ProviderToolCall]:
    """Every call replayed in ``messages`` (assistant turns), in order."""
    for message in messages:
        yield from message.tool_calls
