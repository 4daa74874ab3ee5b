"""Providers: the protocol types, the scripted double, and the OpenAI-compatible provider
against a loopback chat-completions server."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import aclosing
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.chat_server import ChatServer, Raw, Reply, Stall, pairing_error, running_chat_server

from prism_om.entries import Message, ToolCall
from prism_om.providers import (
    DoneEvent,
    Provider,
    ProviderError,
    ProviderEvent,
    ProviderMessage,
    ProviderRequest,
    ProviderToolCall,
    ScriptedProvider,
    ScriptExhaustedError,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolDefinition,
    bound_error_text,
    event_stream,
    sanitize_cache_key,
)
from prism_om.providers._sse import SSEDecoder, SSEError, SSEEvent
from prism_om.providers.openai_compat import OpenAICompatibleProvider

SECRET = "sk-test-0123456789abcdef-SECRET"

RECORD_TOOL = ToolDefinition(
    name="record_observations",
    description="Record observations.",
    parameters={
        "type": "object",
        "properties": {"observations": {"type": "array", "items": {"type": "string"}}},
        "required": ["observations"],
    },
)


async def collect(provider: Provider, request: ProviderRequest) -> list[ProviderEvent]:
    async with event_stream(provider, request) as events:
        return [event async for event in events]


def ask(text: str = "hello", **kwargs: Any) -> ProviderRequest:
    return ProviderRequest(
        system="You are a memory observer.",
        messages=[ProviderMessage("user", text)],
        **kwargs,
    )


def fixed_key(key: str | None) -> Callable[[str], Awaitable[str | None]]:
    async def resolve(provider_id: str) -> str | None:
        return key

    return resolve


# -- base ------------------------------------------------------------------------------


def test_sanitize_cache_key_keeps_safe_keys() -> None:
    assert sanitize_cache_key("om:session-1.a_b") == "om:session-1.a_b"
    assert sanitize_cache_key("x" * 64) == "x" * 64


def test_sanitize_cache_key_replaces_and_hashes() -> None:
    changed = sanitize_cache_key("om:a b/c")
    assert changed.startswith("om:a-b-c-")
    assert changed == sanitize_cache_key("om:a b/c")  # stable
    assert changed != sanitize_cache_key("om:a-b-c")  # no collapse onto the safe form
    long = sanitize_cache_key("om:" + "s" * 200)
    assert len(long) == 64
    assert long != sanitize_cache_key("om:" + "s" * 201)


@given(st.text(max_size=300))
def test_sanitize_cache_key_is_always_safe(value: str) -> None:
    key = sanitize_cache_key(value)
    assert len(key) <= 64
    assert all(c.isascii() and (c.isalnum() or c in "._:-") for c in key)


def test_bound_error_text_redacts_before_cutting() -> None:
    text = "x" * 1020 + SECRET
    bounded = bound_error_text(text, [SECRET])
    assert SECRET[:4] not in bounded
    assert len(bounded.encode()) <= 1024
    assert bound_error_text("abcdef", limit=4) == "a…"
    assert len(bound_error_text("ü" * 2000).encode()) <= 1024


def test_provider_error_is_redacted_and_bounded() -> None:
    error = ProviderError(f"bad key {SECRET} " + "y" * 5000, status=401, secrets=[SECRET])
    assert SECRET not in str(error)
    assert "[redacted]" in str(error)
    assert len(str(error).encode()) <= 1024
    assert error.status == 401


def test_request_freezes_its_sequences() -> None:
    messages = [ProviderMessage("user", "a")]
    options = {"temperature": 0}
    request = ProviderRequest(messages=messages, options=options)
    messages.append(ProviderMessage("user", "b"))
    options["temperature"] = 1
    assert len(request.messages) == 1
    assert request.options == {"temperature": 0}


def test_message_rules_and_conversion() -> None:
    with pytest.raises(ValueError):
        ProviderMessage("tool", "result")
    with pytest.raises(ValueError):
        ProviderMessage("user", "x", tool_calls=[ProviderToolCall("c", "t")])
    message = Message(
        role="assistant", content="ok", tool_calls=[ToolCall(id="c1", name="t", arguments={"a": 1})]
    )
    converted = ProviderMessage.from_message(message)
    assert converted.tool_calls == (ProviderToolCall("c1", "t", '{"a": 1}'),)
    tool = ProviderMessage.from_message(Message(role="tool", content="done", tool_call_id="c1"))
    assert (tool.role, tool.content, tool.tool_call_id) == ("tool", "done", "c1")


def test_tool_call_event_replays_as_call() -> None:
    event = ToolCallEvent("c1", "t", '{"x":1}')
    assert event.type == "tool_call"
    assert event.to_call() == ProviderToolCall("c1", "t", '{"x":1}')


def test_providers_satisfy_the_protocol() -> None:
    assert isinstance(ScriptedProvider([]), Provider)
    assert isinstance(OpenAICompatibleProvider("http://127.0.0.1:9"), Provider)


def test_import_prism_om_needs_no_httpx() -> None:
    code = (
        "import sys; sys.modules['httpx'] = None\n"
        "import prism_om, prism_om.providers\n"
        "assert 'prism_om.providers.openai_compat' not in sys.modules\n"
        "try:\n"
        "    import prism_om.providers.openai_compat\n"
        "except ImportError as exc:\n"
        "    assert 'prism-om[openai]' in str(exc), exc\n"
        "else:\n"
        "    raise SystemExit('imported without httpx')\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# -- scripted --------------------------------------------------------------------------


async def test_scripted_replays_turns_and_records_requests() -> None:
    provider = ScriptedProvider(
        [
            [
                {"thinking": "hmm"},
                {"tool_call": {"name": "record_observations", "arguments": {"observations": []}}},
                {"tool_call": {"name": "record_observations", "arguments": '{"raw": 1}'}},
            ],
            [{"text": "done"}],
        ]
    )
    first = await collect(provider, ask("one"))
    second = await collect(provider, ask("two"))
    assert first == [
        ThinkingEvent("hmm"),
        ToolCallEvent("call_1_0", "record_observations", '{"observations": []}'),
        ToolCallEvent("call_1_1", "record_observations", '{"raw": 1}'),
        DoneEvent("tool_calls"),
    ]
    assert second == [TextEvent("done"), DoneEvent("stop")]
    assert [r.messages[0].content for r in provider.requests] == ["one", "two"]
    assert provider.remaining == 0


async def test_scripted_exhaustion_raises_by_default() -> None:
    provider = ScriptedProvider([[{"text": "only"}]])
    await collect(provider, ask())
    with pytest.raises(ScriptExhaustedError, match="turn 2 was requested but only 1"):
        await collect(provider, ask())
    assert len(provider.requests) == 2


async def test_scripted_then_stop_repeats_a_bare_done() -> None:
    provider = ScriptedProvider([], then="stop")
    assert await collect(provider, ask()) == [DoneEvent("stop")]
    assert await collect(provider, ask()) == [DoneEvent("stop")]


async def test_scripted_callable_turns_see_the_request() -> None:
    def echo(request: ProviderRequest) -> list[Any]:
        return [{"text": request.messages[-1].content.upper()}]

    async def call(request: ProviderRequest) -> list[Any]:
        return [ToolCallEvent("mine", "t", "{}"), DoneEvent("tool_calls", {"total_tokens": 3})]

    provider = ScriptedProvider([echo, call])
    assert await collect(provider, ask("abc")) == [TextEvent("ABC"), DoneEvent("stop")]
    assert await collect(provider, ask()) == [
        ToolCallEvent("mine", "t", "{}"),
        DoneEvent("tool_calls", {"total_tokens": 3}),
    ]


async def test_scripted_errors_and_explicit_done() -> None:
    provider = ScriptedProvider(
        [
            [{"text": "a"}, {"error": "boom"}],
            [RuntimeError("transport down")],
            [{"done": {"stop_reason": "length", "usage": {"x": 1}}}, {"text": "never"}],
        ]
    )
    seen: list[ProviderEvent] = []
    with pytest.raises(ProviderError, match="boom"):
        async with aclosing(provider.generate(ask())) as events:
            async for event in events:
                seen.append(event)
    assert seen == [TextEvent("a")]
    with pytest.raises(RuntimeError):
        await collect(provider, ask())
    assert await collect(provider, ask()) == [DoneEvent("length", {"x": 1})]


def test_scripted_rejects_bad_items_early() -> None:
    with pytest.raises(TypeError):
        ScriptedProvider([[{"txt": "typo"}]])
    with pytest.raises(TypeError):
        ScriptedProvider([[{"tool_call": {"arguments": {}}}]])
    with pytest.raises(ValueError):
        ScriptedProvider([], then="loop")  # type: ignore[arg-type]


# -- server-sent events ----------------------------------------------------------------


@given(st.data())
def test_sse_decoder_is_independent_of_chunking(data: st.DataObject) -> None:
    payloads = data.draw(st.lists(st.text(alphabet='ab{}:" ü', max_size=20), max_size=5))
    eol = data.draw(st.sampled_from(["\n", "\r\n", "\r"]))
    stream = "".join(f": ping{eol}data: {p}{eol}{eol}" for p in payloads).encode()
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    start = 0
    for cut in [*cuts, len(stream)]:
        events += decoder.feed(stream[start:cut])
        start = cut
    events += decoder.flush()
    assert [e.data for e in events] == payloads
    assert all(e.event == "message" for e in events)


def test_sse_decoder_fields_and_bounds() -> None:
    decoder = SSEDecoder(max_event_bytes=32)
    events = decoder.feed(b"event: error\ndata: a\ndata: b\nid: 7\n\n")
    assert events == [SSEEvent("error", "a\nb")]
    with pytest.raises(SSEError):
        decoder.feed(b"data: " + b"x" * 40)
    with pytest.raises(SSEError):
        SSEDecoder().feed(b"data: \xff\n\n")


# -- OpenAI-compatible provider against the loopback server ----------------------------


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with running_chat_server() as chat:
        yield chat


@pytest.fixture
def keyed_server() -> Iterator[ChatServer]:
    with running_chat_server(api_key=SECRET) as chat:
        yield chat


@pytest.fixture
async def make_provider() -> AsyncIterator[Callable[..., OpenAICompatibleProvider]]:
    made: list[OpenAICompatibleProvider] = []

    def make(base_url: str, **kwargs: Any) -> OpenAICompatibleProvider:
        kwargs.setdefault("model", "test-model")
        provider = OpenAICompatibleProvider(base_url, **kwargs)
        made.append(provider)
        return provider

    yield make
    for provider in made:
        await provider.aclose()


def text_of(events: list[ProviderEvent], kind: type[TextEvent | ThinkingEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, kind))


@pytest.mark.parametrize("stream", [True, False])
async def test_text_reply(server: ChatServer, make_provider: Any, stream: bool) -> None:
    server.queue(Reply(text="Hello there, observer."))
    provider = make_provider(server.url, stream=stream)
    events = await collect(provider, ask())
    assert text_of(events, TextEvent) == "Hello there, observer."
    assert events[-1] == DoneEvent(
        "stop", {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}
    )
    assert sum(isinstance(e, DoneEvent) for e in events) == 1
    if stream:
        assert sum(isinstance(e, TextEvent) for e in events) > 1  # deltas, not one blob
    body = server.requests[0].body
    assert body["stream"] is stream
    assert ("stream_options" in body) is stream


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_thinking(server: ChatServer, make_provider: Any, stream: bool, field: str) -> None:
    server.queue(Reply(reasoning="Let me think about it.", reasoning_field=field, text="42"))
    events = await collect(make_provider(server.url, stream=stream), ask())
    assert text_of(events, ThinkingEvent) == "Let me think about it."
    assert text_of(events, TextEvent) == "42"


@pytest.mark.parametrize("stream", [True, False])
@pytest.mark.parametrize("interleave", [True, False])
async def test_tool_calls(
    server: ChatServer, make_provider: Any, stream: bool, interleave: bool
) -> None:
    first = json.dumps({"observations": ["The user prefers tea.", "Deadline: Friday."]})
    second = '{"observations": ["ünïcode"]}'
    server.queue(
        Reply(
            text="Recording.",
            tool_calls=[
                ("call_a", "record_observations", first),
                ("call_b", "record_observations", second),
                ("call_c", "noop", ""),
            ],
            chunk_size=3,
            interleave=interleave,
        )
    )
    events = await collect(make_provider(server.url, stream=stream), ask(tools=[RECORD_TOOL]))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    assert calls == [
        ToolCallEvent("call_a", "record_observations", first),
        ToolCallEvent("call_b", "record_observations", second),
        ToolCallEvent("call_c", "noop", "{}"),
    ]
    assert events[-1].type == "done"
    assert isinstance(events[-1], DoneEvent) and events[-1].stop_reason == "tool_calls"


async def test_request_mapping(server: ChatServer, make_provider: Any) -> None:
    server.queue(Reply(text="ok"))
    request = ProviderRequest(
        system="System prompt.",
        messages=[
            ProviderMessage("user", "Observe this."),
            ProviderMessage(
                "assistant",
                "",
                tool_calls=[ProviderToolCall("c1", "record_observations", '{"observations":[]}')],
            ),
            ProviderMessage("tool", '{"ok":true}', tool_call_id="c1"),
            ProviderMessage("user", "And this."),
        ],
        tools=[RECORD_TOOL],
        model="worker-model",
        thinking_level="low",
        correlation_id="om:session 1",
        max_output_tokens=256,
        options={"temperature": 0.2, "user": None},
    )
    await collect(make_provider(server.url, max_tokens_field="max_completion_tokens"), request)
    body = server.requests[0].body
    assert server.requests[0].path == "/v1/chat/completions"
    assert body["model"] == "worker-model"
    assert body["messages"] == [
        {"role": "system", "content": "System prompt."},
        {"role": "user", "content": "Observe this."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {
                        "name": "record_observations",
                        "arguments": '{"observations":[]}',
                    },
                }
            ],
        },
        {"role": "tool", "content": '{"ok":true}', "tool_call_id": "c1"},
        {"role": "user", "content": "And this."},
    ]
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "record_observations",
                "description": "Record observations.",
                "parameters": dict(RECORD_TOOL.parameters),
            },
        }
    ]
    assert body["reasoning_effort"] == "low"
    assert body["prompt_cache_key"] == sanitize_cache_key("om:session 1")
    assert "user" not in body  # removed by options
    assert body["max_completion_tokens"] == 256
    assert body["temperature"] == 0.2


async def test_defaults_leave_optional_fields_out(server: ChatServer, make_provider: Any) -> None:
    server.queue(Reply(text="ok"))
    request = ProviderRequest(messages=[ProviderMessage("user", "hi")], thinking_level="off")
    await collect(make_provider(server.url), request)
    body = server.requests[0].body
    assert body["model"] == "test-model"
    assert body["messages"] == [{"role": "user", "content": "hi"}]
    for absent in ("tools", "reasoning_effort", "user", "prompt_cache_key", "max_tokens"):
        assert absent not in body


async def test_correlation_id_passes_through(server: ChatServer, make_provider: Any) -> None:
    server.queue(Reply(text="ok"))
    await collect(make_provider(server.url), ask(correlation_id="om:abc-123"))
    body = server.requests[0].body
    assert body["user"] == body["prompt_cache_key"] == "om:abc-123"


async def test_no_authorization_without_credential(server: ChatServer, make_provider: Any) -> None:
    server.queue(Reply(text="a"), Reply(text="b"))
    await collect(make_provider(server.url), ask())
    await collect(make_provider(server.url, credential_resolver=fixed_key(None)), ask())
    assert all("authorization" not in r.headers for r in server.requests)


async def test_credential_resolver_supplies_the_key(
    keyed_server: ChatServer, make_provider: Any
) -> None:
    asked: list[str] = []

    async def resolve(provider_id: str) -> str | None:
        asked.append(provider_id)
        return SECRET

    keyed_server.queue(Reply(text="ok"))
    provider = make_provider(keyed_server.url, credential_resolver=resolve, provider_id="local")
    events = await collect(provider, ask())
    assert text_of(events, TextEvent) == "ok"
    assert asked == ["local"]
    assert keyed_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


async def test_api_key_env(
    keyed_server: ChatServer, make_provider: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PRISM_TEST_KEY", SECRET)
    keyed_server.queue(Reply(text="ok"))
    await collect(make_provider(keyed_server.url, api_key_env="PRISM_TEST_KEY"), ask())
    assert keyed_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"


async def test_wrong_key_error_never_leaks_it(keyed_server: ChatServer, make_provider: Any) -> None:
    wrong = "sk-wrong-key-9876543210-do-not-print"
    provider = make_provider(keyed_server.url, credential_resolver=fixed_key(wrong))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask())
    error = caught.value
    assert error.status == 401
    assert wrong not in str(error) and wrong not in repr(error.args)
    assert "Incorrect API key provided: [redacted]" in str(error)
    assert error.__cause__ is None


@pytest.mark.parametrize("status", [302, 400, 404, 429, 500, 503])
async def test_error_statuses(server: ChatServer, make_provider: Any, status: int) -> None:
    server.queue(Raw(status, b'{"error": {"message": "nope ' + b"z" * 5000 + b'"}}'))
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.url), ask())
    assert caught.value.status == status
    assert f"HTTP {status}" in str(caught.value) and "nope" in str(caught.value)
    assert len(str(caught.value).encode()) <= 1024


async def test_plain_text_error_body(server: ChatServer, make_provider: Any) -> None:
    server.queue(Raw(502, b"Bad Gateway", "text/plain"))
    with pytest.raises(ProviderError, match=r"HTTP 502.*Bad Gateway"):
        await collect(make_provider(server.url), ask())


@pytest.mark.parametrize(
    "body",
    [
        # no [DONE] and no finish_reason
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n',
        # a chunk that is not JSON
        b"data: {not json\n\n",
        # an error object inside the stream
        b'data: {"error":{"message":"overloaded"}}\n\n',
        # a tool call that never names its function
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c",'
        b'"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n',
        # a chunk nested past the JSON parser's recursion
        pytest.param(b"data: " + b"[" * 100_000 + b"\n\n", id="deep-chunk"),
    ],
)
async def test_malformed_stream(server: ChatServer, make_provider: Any, body: bytes) -> None:
    server.queue(Raw(200, body, "text/event-stream"))
    with pytest.raises(ProviderError):
        await collect(make_provider(server.url), ask())


async def test_stream_ending_with_finish_reason_but_no_done_is_accepted(
    server: ChatServer, make_provider: Any
) -> None:
    body = b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
    server.queue(Raw(200, body, "text/event-stream"))
    events = await collect(make_provider(server.url), ask())
    assert events == [TextEvent("hi"), DoneEvent("stop", None)]


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"[]",
        b'{"choices": []}',
        b'{"error": "x"}',
        # Nested past the JSON parser's recursion.
        pytest.param(b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", id="deep"),
    ],
)
async def test_malformed_json_response(server: ChatServer, make_provider: Any, body: bytes) -> None:
    server.queue(Raw(200, body))
    with pytest.raises(ProviderError):
        await collect(make_provider(server.url, stream=False), ask())


async def test_json_answer_to_a_stream_request(server: ChatServer, make_provider: Any) -> None:
    server.queue(Raw(200, json.dumps({"choices": [{"message": {"content": "x"}}]}).encode()))
    events = await collect(make_provider(server.url, stream=True), ask())
    assert events == [TextEvent("x"), DoneEvent(None, None)]


async def test_response_size_is_bounded(server: ChatServer, make_provider: Any) -> None:
    server.queue(Reply(text="y" * 5000, chunk_size=1000))
    with pytest.raises(ProviderError, match="exceeds"):
        await collect(make_provider(server.url, max_response_bytes=2048), ask())


def test_server_pairing_rules() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "t", "arguments": "{}"}}
    user = {"role": "user", "content": "u"}
    assistant = {"role": "assistant", "content": None, "tool_calls": [call]}
    tool = {"role": "tool", "tool_call_id": "c1", "content": "r"}
    assert pairing_error([user, assistant, tool, user]) is None
    assert pairing_error([user, tool]) is not None  # result without a call
    assert pairing_error([user, assistant, user]) is not None  # call without a result
    assert pairing_error([user, assistant]) is not None
    assert pairing_error([user, assistant, tool, tool]) is not None  # answered twice
    other = {**tool, "tool_call_id": "c2"}
    assert pairing_error([user, assistant, other]) is not None


async def test_pairing_violation_is_a_provider_error(
    server: ChatServer, make_provider: Any
) -> None:
    request = ProviderRequest(
        messages=[
            ProviderMessage("user", "go"),
            ProviderMessage("assistant", "", tool_calls=[ProviderToolCall("c1", "t")]),
            ProviderMessage("user", "no result in between"),
        ]
    )
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(server.url), request)
    assert caught.value.status == 400
    assert "tool_call_id" in str(caught.value)
    assert server.rejections


async def test_tool_round_trip(server: ChatServer, make_provider: Any) -> None:
    """A worker-style loop: call, replay the call and its result, then a final answer."""
    server.queue(
        Reply(tool_calls=[("c1", "record_observations", '{"observations":["x"]}')]),
        Reply(text="recorded"),
    )
    provider = make_provider(server.url)
    transcript = [ProviderMessage("user", "observe")]
    events = await collect(provider, ProviderRequest(messages=transcript, tools=[RECORD_TOOL]))
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    transcript.append(ProviderMessage("assistant", "", tool_calls=[c.to_call() for c in calls]))
    transcript.extend(ProviderMessage("tool", '{"ok":true}', tool_call_id=c.id) for c in calls)
    events = await collect(provider, ProviderRequest(messages=transcript, tools=[RECORD_TOOL]))
    assert text_of(events, TextEvent) == "recorded"
    assert not server.rejections


@pytest.mark.parametrize("partial", [None, b'data: {"choices":[{"index":0,"delta":{}}]}\n\n'])
async def test_timeout_is_bounded(
    server: ChatServer, make_provider: Any, partial: bytes | None
) -> None:
    server.queue(Stall(partial=partial))
    provider = make_provider(server.url, timeout=0.3)
    started = time.monotonic()
    with pytest.raises(ProviderError, match="timed out"):
        await collect(provider, ask())
    assert time.monotonic() - started < 2.0


async def test_connection_refused(make_provider: Any) -> None:
    with running_chat_server() as chat:
        url = chat.url  # a port that is closed once the server stops
    with pytest.raises(ProviderError, match="failed"):
        await collect(make_provider(url, timeout=1.0), ask())


async def test_userinfo_never_shows_in_errors(server: ChatServer, make_provider: Any) -> None:
    server.queue(Raw(500, b"{}"))
    url = server.url.replace("http://", f"http://user:{SECRET}@")
    with pytest.raises(ProviderError) as caught:
        await collect(make_provider(url), ask())
    assert SECRET not in str(caught.value)


async def test_early_close_and_reuse(server: ChatServer, make_provider: Any) -> None:
    server.queue(Reply(text="a long answer in many pieces", chunk_size=2), Reply(text="next"))
    provider = make_provider(server.url)
    async with aclosing(provider.generate(ask())) as events:
        async for event in events:
            assert isinstance(event, TextEvent)
            break
    events2 = await collect(provider, ask())
    assert text_of(events2, TextEvent) == "next"


async def test_async_with_and_closed_use(server: ChatServer) -> None:
    server.queue(Reply(text="ok"))
    async with OpenAICompatibleProvider(server.url, "m") as provider:
        await collect(provider, ask())
    await provider.aclose()  # idempotent
    with pytest.raises(ProviderError, match="after aclose"):
        await collect(provider, ask())


async def test_borrowed_client_stays_open(server: ChatServer) -> None:
    import httpx

    server.queue(Reply(text="ok"))
    async with httpx.AsyncClient() as client:
        provider = OpenAICompatibleProvider(server.url, "m", client=client)
        await collect(provider, ask())
        await provider.aclose()
        assert not client.is_closed
