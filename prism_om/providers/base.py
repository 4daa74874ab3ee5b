"""The ``Provider`` protocol: one model call in, a stream of events out.

A provider takes a ``ProviderRequest`` (system text, messages, tool definitions, model and
per-call options) and yields ``ProviderEvent`` values::

    ProviderEvent
    ├── TextEvent       a piece of answer text (streamed providers yield deltas)
    ├── ThinkingEvent   a piece of reasoning text
    ├── ToolCallEvent   one complete tool call; ``arguments`` is the raw JSON text
    └── DoneEvent       always last: the stop reason and token usage, when known

Memory workers are tool-only: they read ``ToolCallEvent`` and ignore the rest. A tool
call's arguments stay the exact text the model produced, because the worker runtime
measures raw bytes before it parses anything.

``generate`` is an async generator. A consumer that may stop early reads it inside
``event_stream(provider, request)``, which closes it on exit, so that the provider
releases its connection at once instead of whenever the generator is collected.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable

from ..errors import InvalidInputError, PrismMemoryError

if TYPE_CHECKING:
    from ..entries import Message

__all__ = [
    "MAX_PROVIDER_ERROR_BYTES",
    "CredentialResolver",
    "DoneEvent",
    "Provider",
    "ProviderError",
    "ProviderEvent",
    "ProviderMessage",
    "ProviderRequest",
    "ProviderRole",
    "ProviderToolCall",
    "TextEvent",
    "ThinkingEvent",
    "ToolCallEvent",
    "ToolDefinition",
    "bound_error_text",
    "event_stream",
    "sanitize_cache_key",
]

ProviderRole = Literal["system", "user", "assistant", "tool"]

CredentialResolver: TypeAlias = Callable[[str], Awaitable[str | None]]
"""``async (provider_id) -> api key or None``: the only way a provider learns a secret."""

# The specification's default maxWorkerErrorBytes: a provider error never exceeds it.
MAX_PROVIDER_ERROR_BYTES = 1024

_REDACTED = "[redacted]"
_ELLIPSIS = "…"


def bound_error_text(
    text: str, secrets: Iterable[str | None] = (), limit: int = MAX_PROVIDER_ERROR_BYTES
) -> str:
    """``text`` with every exact secret replaced, then cut to at most ``limit`` UTF-8 bytes.

    Redaction runs first: cutting first could leave a secret's prefix behind. It is the
    memory redaction (every escaped form; overlapping secrets replaced as one run).
    """
    from ..core.redaction import Redactor  # imported late: no import cycle

    text = Redactor([s for s in secrets if s], marker=_REDACTED).text(text)
    raw = text.encode("utf-8")
    if len(raw) <= limit:
        return text
    room = max(limit - len(_ELLIPSIS.encode("utf-8")), 0)
    return raw[:room].decode("utf-8", errors="ignore") + _ELLIPSIS


class ProviderError(PrismMemoryError):
    """A model call failed: an HTTP error status, a broken protocol, a timeout.

    The message is redacted of the given secrets and bounded to
    ``MAX_PROVIDER_ERROR_BYTES``; ``status`` is the HTTP status when there was one;
    ``transient`` says whether retrying the same request later may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider_id: str | None = None,
        secrets: Iterable[str | None] = (),
        transient: bool | None = None,
    ) -> None:
        text = bound_error_text(message, secrets)
        super().__init__(text)
        self.message = text
        self.status = status
        self.provider_id = provider_id
        # Transient: the same request may well succeed later (a timeout, a dropped
        # connection, 408, 429, 5xx). The observer never splits or skips a chunk for a
        # transient failure, so an outage cannot cost a message its observation.
        self.transient = (
            transient
            if transient is not None
            else status is not None and (status in (408, 429) or status >= 500)
        )


_CACHE_KEY_UNSAFE = re.compile(r"[^A-Za-z0-9._:-]")
_CACHE_KEY_MAX = 64
_CACHE_KEY_HASH = 10


def sanitize_cache_key(value: str) -> str:
    """A provider-safe cache key: ``[A-Za-z0-9._:-]``, at most 64 characters.

    Other characters become ``-``. When anything changed or was cut, a short hash of the
    original is appended, so two different inputs do not collapse to one key.
    """
    cleaned = _CACHE_KEY_UNSAFE.sub("-", value)
    if cleaned == value and len(value) <= _CACHE_KEY_MAX:
        return value
    digest = hashlib.sha256(value.encode("utf-8")).hexdigest()[:_CACHE_KEY_HASH]
    return f"{cleaned[: _CACHE_KEY_MAX - _CACHE_KEY_HASH - 1]}-{digest}"


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool the model may call; ``parameters`` is a JSON schema for its arguments."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )


@dataclass(frozen=True, slots=True)
class ProviderToolCall:
    """A tool call replayed in an assistant message; ``arguments`` is JSON text."""

    id: str
    name: str
    arguments: str = "{}"

    @classmethod
    def of(cls, id: str, name: str, arguments: str | Mapping[str, Any]) -> ProviderToolCall:
        """Build a call from raw JSON text or from an arguments mapping."""
        if not isinstance(arguments, str):
            arguments = json.dumps(dict(arguments), ensure_ascii=False)
        return cls(id=id, name=name, arguments=arguments)


@dataclass(frozen=True, slots=True)
class ProviderMessage:
    """One message of the provider transcript.

    ``tool_calls`` belong to assistant messages; ``tool_call_id`` to tool messages.
    """

    role: ProviderRole
    content: str = ""
    tool_calls: Sequence[ProviderToolCall] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        # Freeze the sequence: a caller that keeps appending to its list must not
        # rewrite a request that was already sent (or recorded by a test double).
        object.__setattr__(self, "tool_calls", tuple(self.tool_calls))
        if self.role == "tool" and not self.tool_call_id:
            raise InvalidInputError("a tool message needs tool_call_id")
        if self.tool_calls and self.role != "assistant":
            raise InvalidInputError("only an assistant message carries tool_calls")

    @classmethod
    def from_message(cls, message: Message) -> ProviderMessage:
        """Convert a session entry's message (its text parts, calls and call id)."""
        calls = tuple(
            ProviderToolCall.of(c.id, c.name, c.arguments) for c in message.tool_calls or ()
        )
        return cls(
            role=message.role,
            content=message.text(),
            tool_calls=calls,
            tool_call_id=message.tool_call_id,
            name=message.name,
        )


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """Everything one provider call needs.

    ``correlation_id`` is a stable id for prompt caching and attribution (workers use
    ``om:{session.id}``); adapters pass it through ``sanitize_cache_key``. ``options`` are
    provider-specific overrides, applied last.
    """

    system: str = ""
    messages: Sequence[ProviderMessage] = ()
    tools: Sequence[ToolDefinition] = ()
    model: str | None = None
    thinking_level: str | None = None
    correlation_id: str | None = None
    max_output_tokens: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", tuple(self.messages))
        object.__setattr__(self, "tools", tuple(self.tools))
        object.__setattr__(self, "options", dict(self.options))


@dataclass(frozen=True, slots=True)
class TextEvent:
    """A piece of answer text."""

    text: str
    type: Literal["text"] = field(default="text", init=False)


@dataclass(frozen=True, slots=True)
class ThinkingEvent:
    """A piece of reasoning text."""

    text: str
    type: Literal["thinking"] = field(default="thinking", init=False)


@dataclass(frozen=True, slots=True)
class ToolCallEvent:
    """One complete tool call; ``arguments`` is the raw JSON text the model produced."""

    id: str
    name: str
    arguments: str
    type: Literal["tool_call"] = field(default="tool_call", init=False)

    def to_call(self) -> ProviderToolCall:
        """The call as it is replayed in the next request's assistant message."""
        return ProviderToolCall(id=self.id, name=self.name, arguments=self.arguments)


@dataclass(frozen=True, slots=True)
class DoneEvent:
    """The last event of a turn: why the model stopped, and token usage when known."""

    stop_reason: str | None = "stop"
    usage: Mapping[str, Any] | None = None
    type: Literal["done"] = field(default="done", init=False)


ProviderEvent: TypeAlias = TextEvent | ThinkingEvent | ToolCallEvent | DoneEvent


@runtime_checkable
class Provider(Protocol):
    """A model backend. Implement ``generate`` as an async generator method."""

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Call the model once and yield its events, ending with one ``DoneEvent``."""


@asynccontextmanager
async def event_stream(
    provider: Provider, request: ProviderRequest
) -> AsyncIterator[AsyncIterator[ProviderEvent]]:
    """Start ``provider.generate(request)`` and close the event iterator on exit.

    ``async with event_stream(p, r) as events: async for event in events: ...``
    """
    events = provider.generate(request)
    try:
        yield events
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
