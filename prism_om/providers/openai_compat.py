"""``OpenAICompatibleProvider``: the chat-completions protocol over ``httpx``.

Works with OpenAI and with the servers that copy its API: Ollama, vLLM, the llama.cpp
server, LM Studio. Needs the ``openai`` extra (``pip install 'prism-om[openai]'``), which
is only ``httpx``; ``import prism_om`` never imports this module.

The API key comes from the explicit credential resolver, or from the environment
variable named by ``api_key_env``; nothing else is read. Without a key no
``Authorization`` header is sent, which is what local servers expect.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncGenerator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self
from urllib.parse import urlsplit, urlunsplit
from uuid import uuid4

from .._extras import install_hint

try:
    import httpx
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        f"prism_om.providers.openai_compat needs httpx: {install_hint('openai')}"
    ) from exc

from ..errors import InvalidInputError
from ._sse import SSEDecoder, SSEError
from .base import (
    CredentialResolver,
    DoneEvent,
    ProviderError,
    ProviderEvent,
    ProviderMessage,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    sanitize_cache_key,
)

__all__ = ["OpenAICompatibleProvider"]

# An error body is read only this far: the message we keep is 1 KiB anyway.
_ERROR_BODY_BYTES = 8 * 1024
_ErrorFactory = Callable[..., ProviderError]
# Thinking levels that mean "no reasoning": the field is left out rather than guessed.
_NO_REASONING = frozenset({"off", "none", ""})


class OpenAICompatibleProvider:
    """A ``Provider`` speaking ``POST {base_url}/chat/completions``.

    ``model`` is the default when a request names none. ``request.options`` are merged
    into the JSON body last (a ``None`` value removes a key); ``stream`` among them
    switches between streamed and plain responses for that call. Pass ``client`` to use
    your own ``httpx.AsyncClient`` (it is then yours to close).
    """

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        *,
        credential_resolver: CredentialResolver | None = None,
        provider_id: str = "openai",
        api_key_env: str | None = None,
        timeout: float = 60.0,
        stream: bool = True,
        extra_headers: Mapping[str, str] | None = None,
        max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens",
        max_response_bytes: int = 16 * 1024 * 1024,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        if timeout <= 0:
            raise InvalidInputError(f"timeout must be positive, got {timeout!r}")
        self.base_url = base_url.rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        self.model = model
        self.provider_id = provider_id
        self.stream = stream
        self.timeout = timeout
        self.max_tokens_field = max_tokens_field
        self.max_response_bytes = max_response_bytes
        self._resolver = credential_resolver
        self._api_key_env = api_key_env
        self._extra_headers = dict(extra_headers or {})
        self._client = client
        self._owns_client = client is None
        self._closed = False
        # Error messages name the endpoint without userinfo or query, which may hold keys.
        parts = urlsplit(self.url)
        host = parts.netloc.rpartition("@")[2]
        self._display_url = urlunsplit((parts.scheme, host, parts.path, "", ""))

    # -- lifecycle ---------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the HTTP client this provider created; safe to call twice."""
        self._closed = True
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _http(self) -> httpx.AsyncClient:
        if self._closed:
            raise ProviderError(
                f"{self.provider_id}: provider used after aclose()", provider_id=self.provider_id
            )
        if self._client is None:
            # Created on first use, inside the running loop, so an unused provider holds
            # nothing that needs closing.
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(self.timeout))
        return self._client

    # -- request ---------------------------------------------------------------------

    async def _api_key(self) -> str | None:
        key: str | None = None
        if self._resolver is not None:
            key = await self._resolver(self.provider_id)
        if not key and self._api_key_env:
            key = os.environ.get(self._api_key_env)
        return key or None

    def build_body(self, request: ProviderRequest) -> dict[str, Any]:
        """The JSON body for ``request`` (without the ``stream`` decision applied)."""
        messages: list[dict[str, Any]] = []
        if request.system:
            messages.append({"role": "system", "content": request.system})
        messages.extend(_wire_message(m) for m in request.messages)
        body: dict[str, Any] = {"messages": messages}
        model = request.model or self.model
        if model:
            body["model"] = model
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if request.thinking_level and request.thinking_level.lower() not in _NO_REASONING:
            body["reasoning_effort"] = request.thinking_level
        if request.correlation_id:
            key = sanitize_cache_key(request.correlation_id)
            body["user"] = key
            body["prompt_cache_key"] = key
        if request.max_output_tokens is not None:
            body[self.max_tokens_field] = request.max_output_tokens
        for name, value in request.options.items():
            if value is None:
                body.pop(name, None)
            else:
                body[name] = value
        return body

    # -- the call --------------------------------------------------------------------

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        """Send one chat-completions request and yield its events."""
        body = self.build_body(request)
        stream = body.pop("stream", self.stream)
        stream = bool(stream)
        body["stream"] = stream
        if stream and "stream_options" not in body and "stream_options" not in request.options:
            body["stream_options"] = {"include_usage": True}
        if not stream:
            body.pop("stream_options", None)
        key = await self._api_key()
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        headers.update(self._extra_headers)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        secrets = [key, *(v for v in self._extra_headers.values() if len(v) >= 8)]
        client = self._http()
        try:
            async with client.stream(
                "POST", self.url, json=body, headers=headers, timeout=httpx.Timeout(self.timeout)
            ) as response:
                # Redirects are not followed, so a 3xx is as much a failure as a 4xx.
                if not 200 <= response.status_code < 300:
                    raw, _ = await _read_bounded(response, _ERROR_BODY_BYTES)
                    raise self._error(
                        f"HTTP {response.status_code} from POST {self._display_url}: "
                        f"{_error_detail(raw)}",
                        secrets,
                        status=response.status_code,
                    )
                content_type = response.headers.get("content-type", "")
                if stream and "json" not in content_type:
                    # Closed explicitly: an early exit of ours must not leave it to the GC.
                    async with aclosing(self._read_stream(response, secrets)) as events:
                        async for event in events:
                            yield event
                else:
                    # Some servers ignore ``stream`` and answer with one JSON document.
                    raw, too_long = await _read_bounded(response, self.max_response_bytes)
                    if too_long:
                        raise self._error(
                            f"response exceeds {self.max_response_bytes} bytes", secrets
                        )
                    for event in self._parse_completion(raw, secrets):
                        yield event
        except httpx.TimeoutException as exc:
            raise self._error(
                f"timed out after {self.timeout:g}s waiting for POST {self._display_url} "
                f"({type(exc).__name__})",
                secrets,
                transient=True,
            ) from None
        except httpx.HTTPError as exc:
            raise self._error(
                f"POST {self._display_url} failed: {type(exc).__name__}: {exc}",
                secrets,
                transient=True,
            ) from None

    def _error(
        self,
        message: str,
        secrets: list[str | None],
        *,
        status: int | None = None,
        transient: bool | None = None,
    ) -> ProviderError:
        return ProviderError(
            f"{self.provider_id}: {message}",
            status=status,
            provider_id=self.provider_id,
            secrets=secrets,
            transient=transient,
        )

    async def _read_stream(
        self, response: httpx.Response, secrets: list[str | None]
    ) -> AsyncGenerator[ProviderEvent, None]:
        decoder = SSEDecoder(max_event_bytes=self.max_response_bytes)
        state = _StreamState()
        received = 0
        try:
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > self.max_response_bytes:
                    raise self._error(
                        f"streamed response exceeds {self.max_response_bytes} bytes", secrets
                    )
                for sse in decoder.feed(chunk):
                    for event in self._stream_event(sse.event, sse.data, state, secrets):
                        yield event
                    if state.done_marker:
                        break
                if state.done_marker:
                    break
            if not state.done_marker:
                for sse in decoder.flush():
                    for event in self._stream_event(sse.event, sse.data, state, secrets):
                        yield event
        except SSEError as exc:
            raise self._error(f"malformed event stream: {exc}", secrets) from None
        if not state.done_marker and state.finish_reason is None:
            raise self._error("the event stream ended before [DONE] or a finish_reason", secrets)
        for call in state.finished_calls(self._error, secrets):
            yield call
        yield DoneEvent(state.finish_reason, state.usage)

    def _stream_event(
        self, name: str, data: str, state: _StreamState, secrets: list[str | None]
    ) -> list[ProviderEvent]:
        if data.strip() == "[DONE]":
            state.done_marker = True
            return []
        chunk = _json(data, "stream chunk", self._error, secrets)
        if name == "error" or chunk.get("error"):
            raise self._error(
                f"error in event stream: {_error_detail(json.dumps(chunk).encode())}", secrets
            )
        events: list[ProviderEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            state.usage = usage
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            raise self._error("stream chunk 'choices' is not a list", secrets)
        for choice in choices:
            # One completion is requested (n=1); other indexes would belong to another.
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if not isinstance(delta, dict):
                raise self._error("stream chunk 'delta' is not an object", secrets)
            thinking = _reasoning(delta)
            if thinking:
                events.append(ThinkingEvent(thinking))
            content = delta.get("content")
            if isinstance(content, str) and content:
                events.append(TextEvent(content))
            for fragment in delta.get("tool_calls") or []:
                if not isinstance(fragment, dict):
                    raise self._error("stream tool_calls entry is not an object", secrets)
                state.merge_call(fragment)
            if choice.get("finish_reason"):
                state.finish_reason = str(choice["finish_reason"])
        return events

    def _parse_completion(self, raw: bytes, secrets: list[str | None]) -> list[ProviderEvent]:
        document = _json(raw, "response", self._error, secrets)
        if document.get("error"):
            raise self._error(f"error response: {_error_detail(raw)}", secrets)
        choices = document.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._error("response has no choices", secrets)
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise self._error("response choice has no message", secrets)
        events: list[ProviderEvent] = []
        thinking = _reasoning(message)
        if thinking:
            events.append(ThinkingEvent(thinking))
        text = _content_text(message.get("content"))
        if text:
            events.append(TextEvent(text))
        state = _StreamState()
        for index, call in enumerate(message.get("tool_calls") or []):
            if not isinstance(call, dict):
                raise self._error("response tool_calls entry is not an object", secrets)
            state.merge_call({**call, "index": index})
        events.extend(state.finished_calls(self._error, secrets))
        finish = choice.get("finish_reason")
        usage = document.get("usage")
        events.append(
            DoneEvent(
                str(finish) if finish is not None else None,
                usage if isinstance(usage, dict) else None,
            )
        )
        return events


@dataclass
class _PartialCall:
    id: str | None = None
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _StreamState:
    """What a stream has said so far; tool calls are merged by their ``index``."""

    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    done_marker: bool = False

    def merge_call(self, fragment: dict[str, Any]) -> None:
        call_id = fragment.get("id")
        index = fragment.get("index")
        if not isinstance(index, int):
            # Some servers omit ``index``: a new id starts a call, else continue the last.
            known = {c.id: i for i, c in self.calls.items()}
            if call_id and call_id not in known:
                index = len(self.calls)
            elif call_id:
                index = known[call_id]
            else:
                index = max(self.calls, default=0)
        partial = self.calls.setdefault(index, _PartialCall())
        if call_id:
            partial.id = str(call_id)
        function = fragment.get("function") or {}
        if isinstance(function, dict):
            if function.get("name") and not partial.name:
                # Names arrive whole in the first fragment; some servers repeat them later.
                partial.name = str(function["name"])
            arguments = function.get("arguments")
            if isinstance(arguments, str):
                partial.arguments.append(arguments)
            elif arguments is not None:
                # A few servers send an already-parsed object instead of JSON text.
                partial.arguments.append(json.dumps(arguments, ensure_ascii=False))

    def finished_calls(
        self, error: _ErrorFactory, secrets: list[str | None]
    ) -> list[ToolCallEvent]:
        events: list[ToolCallEvent] = []
        for index in sorted(self.calls):
            partial = self.calls[index]
            if not partial.name:
                raise error(f"tool call at index {index} has no function name", secrets)
            arguments = "".join(partial.arguments)
            events.append(
                ToolCallEvent(
                    id=partial.id or f"call_{uuid4().hex[:24]}",
                    name=partial.name,
                    # A call without arguments is sent as "" by some servers: that is "{}".
                    arguments=arguments if arguments.strip() else "{}",
                )
            )
        return events


def _wire_message(message: ProviderMessage) -> dict[str, Any]:
    wire: dict[str, Any] = {"role": message.role}
    if message.role == "assistant" and message.tool_calls:
        wire["content"] = message.content or None
        wire["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments},
            }
            for c in message.tool_calls
        ]
    else:
        wire["content"] = message.content
    if message.role == "tool":
        wire["tool_call_id"] = message.tool_call_id
    if message.name:
        wire["name"] = message.name
    return wire


def _reasoning(delta: dict[str, Any]) -> str:
    # vLLM and DeepSeek say ``reasoning_content``; Ollama and OpenRouter say ``reasoning``.
    for key in ("reasoning_content", "reasoning"):
        value = delta.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") in ("text", "output_text")
        )
    return ""


def _json(
    raw: str | bytes, what: str, error: _ErrorFactory, secrets: list[str | None]
) -> dict[str, Any]:
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise error(f"{what} is not valid JSON", secrets) from None
    except RecursionError:
        raise error(f"{what} nests too deeply to be parsed", secrets) from None
    if not isinstance(value, dict):
        raise error(f"{what} is not a JSON object", secrets)
    return value


def _error_detail(raw: bytes) -> str:
    """The human part of an error body: ``error.message`` and friends, else the text."""
    text = raw.decode("utf-8", errors="replace").strip()
    try:
        document = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return text or "(empty body)"
    if isinstance(document, dict):
        error = document.get("error", document)
        if isinstance(error, str):
            return error
        if isinstance(error, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(error.get(key), str):
                    return str(error[key])
        if isinstance(document.get("detail"), str):
            return str(document["detail"])
    return text


async def _read_bounded(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether there was more."""
    data = bytearray()
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) > limit:
            return bytes(data[:limit]), True
    return bytes(data), False
