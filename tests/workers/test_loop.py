"""The tool-only worker loop: every limit, every fail-closed path, and the replay order."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from prism_om.core.limits import resolve_memory_worker_limits
from prism_om.core.redaction import Redactor
from prism_om.entries import message_entry
from prism_om.providers import (
    DoneEvent,
    ProviderEvent,
    ProviderRequest,
    ScriptedProvider,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    ToolDefinition,
)
from prism_om.workers import (
    ToolInputError,
    WorkerRunError,
    WorkerTool,
    run_observer,
    run_worker,
)

ECHO = ToolDefinition("echo")


def echo_tool(result: Any = None, seen: list[dict[str, Any]] | None = None) -> WorkerTool:
    def handle(args: dict[str, Any]) -> Any:
        if seen is not None:
            seen.append(args)
        if args.get("bad"):
            raise ToolInputError("bad input sk-SECRET")
        return {"ok": 1} if result is None else result

    return WorkerTool(ECHO, handle)


def call(args: Any = None, name: str = "echo", id: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name, "arguments": args if args is not None else {}}
    if id:
        body["id"] = id
    return {"tool_call": body}


async def run(provider: Any, tool: WorkerTool | None = None, **limits: int) -> Any:
    limits.setdefault("max_worker_turns", 4)
    return await run_worker(
        provider=provider,
        system="sys",
        prompt="prompt",
        tools=[tool or echo_tool()],
        limits=resolve_memory_worker_limits(**limits),
        redactor=Redactor(["sk-SECRET"]),
    )


async def test_text_thinking_done_are_ignored_and_no_call_ends_run() -> None:
    p = ScriptedProvider([[{"text": "hi"}, {"thinking": "hmm"}, {"done": "stop"}]])
    result = await run(p)
    assert (result.turns, result.tool_calls, result.stopped) == (1, 0, "no_tool_call")


async def test_replay_pairs_assistant_calls_with_tool_results_in_order() -> None:
    seen: list[dict[str, Any]] = []
    p = ScriptedProvider([[call({"n": 1}, id="a"), {"text": "x"}, call({"n": 2}, id="b")], []])
    result = await run(p, echo_tool(seen=seen))
    assert result.tool_calls == 2 and seen == [{"n": 1}, {"n": 2}]
    second = p.requests[1].messages
    assert [m.role for m in second] == ["user", "assistant", "tool", "tool"]
    assert [c.id for c in second[1].tool_calls] == ["a", "b"]
    assert [m.tool_call_id for m in second[2:]] == ["a", "b"]
    assert json.loads(second[2].content) == {"ok": True, "value": {"ok": 1}}


async def test_final_turn_calls_execute_and_no_further_turn_starts() -> None:
    seen: list[dict[str, Any]] = []
    p = ScriptedProvider([[call({"n": 1})], [call({"n": 2})], [call({"n": 3})]])
    result = await run(p, echo_tool(seen=seen), max_worker_turns=2)
    assert result.stopped == "max_turns" and len(p.requests) == 2
    assert seen == [{"n": 1}, {"n": 2}]


async def test_unknown_tool_fails_before_anything_executes() -> None:
    seen: list[dict[str, Any]] = []
    p = ScriptedProvider([[call({"n": 1}), call(name="nope")]])
    with pytest.raises(WorkerRunError) as err:
        await run(p, echo_tool(seen=seen))
    assert err.value.reason == "unknown_tool" and seen == []


@pytest.mark.parametrize(
    ("limit", "value", "turns", "reason"),
    [
        ("max_worker_tool_calls_per_turn", 2, [[call(), call(), call()]], "tool_calls_per_turn"),
        ("max_worker_tool_calls", 3, [[call(), call()], [call(), call()]], "tool_calls"),
    ],
)
async def test_call_caps(limit: str, value: int, turns: Any, reason: str) -> None:
    seen: list[dict[str, Any]] = []
    with pytest.raises(WorkerRunError) as err:
        await run(ScriptedProvider(turns), echo_tool(seen=seen), **{limit: value})
    assert err.value.reason == reason
    # The turn that broke the cap executed nothing.
    assert len(seen) == (0 if reason == "tool_calls_per_turn" else 2)


async def test_call_caps_allow_exactly_the_limit() -> None:
    p = ScriptedProvider([[call(), call()], [call()]], then="stop")
    result = await run(p, max_worker_tool_calls_per_turn=2, max_worker_tool_calls=3)
    assert result.tool_calls == 3


async def test_raw_argument_bytes_measured_before_parsing() -> None:
    raw = '{"x": "' + "a" * 2000 + '"'  # not even JSON: size is checked first
    with pytest.raises(WorkerRunError) as err:
        await run(ScriptedProvider([[call(raw)]]), max_worker_argument_bytes=1024)
    assert err.value.reason == "argument_bytes"


async def test_redacted_arguments_measured_again() -> None:
    secret = "s"  # every "s" grows to the 10-byte marker
    p = ScriptedProvider([[call({"t": "s" * 200})]])
    with pytest.raises(WorkerRunError) as err:
        await run_worker(
            provider=p,
            system="",
            prompt="p",
            tools=[echo_tool()],
            limits=resolve_memory_worker_limits(max_worker_turns=2, max_worker_argument_bytes=1024),
            redactor=Redactor([secret]),
        )
    assert err.value.reason == "argument_bytes"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ("{not json", "argument_json"),
        ("[1, 2]", "argument_json"),
        ('{"x": NaN}', "argument_json"),
        ('{"x": ' + "[" * 40 + "]" * 40 + "}", "argument_depth"),
        ('{"x": ' + "[" * 5000 + "]" * 5000 + "}", "argument_depth"),
    ],
)
async def test_bad_arguments_fail(arguments: str, reason: str) -> None:
    with pytest.raises(WorkerRunError) as err:
        await run(ScriptedProvider([[call(arguments)]]))
    assert err.value.reason == reason


async def test_depth_32_is_accepted() -> None:
    nested: Any = 1
    for _ in range(31):
        nested = [nested]
    assert (await run(ScriptedProvider([[call({"x": nested})], []]))).tool_calls == 1


def cyclic() -> Any:
    value: list[Any] = []
    value.append(value)
    return value


def deep() -> Any:
    value: Any = 1
    for _ in range(40):
        value = [value]
    return value


@pytest.mark.parametrize(
    ("result", "reason"),
    [
        ({"x": "a" * 3000}, "result_bytes"),
        (cyclic(), "result_cycle"),
        (deep(), "result_depth"),
        ({"x": object()}, "result_json"),
        ({"x": float("inf")}, "result_json"),
    ],
)
async def test_bad_results_fail(result: Any, reason: str) -> None:
    with pytest.raises(WorkerRunError) as err:
        await run(ScriptedProvider([[call()]]), echo_tool(result), max_worker_result_bytes=1024)
    assert err.value.reason == reason


async def test_result_measured_again_after_redaction() -> None:
    tool = echo_tool({"x": "sk-SECRET" * 90})  # 810 bytes raw, 900+ redacted
    with pytest.raises(WorkerRunError) as err:
        await run(ScriptedProvider([[call()]]), tool, max_worker_result_bytes=900)
    assert err.value.reason == "result_bytes"


async def test_tool_input_error_is_replayed_redacted_and_bounded() -> None:
    p = ScriptedProvider([[call({"bad": True}, id="c1")], []])
    result = await run(p, max_worker_error_bytes=12)
    assert result.tool_calls == 1
    reply = p.requests[1].messages[2]
    payload = json.loads(reply.content)
    assert payload["ok"] is False and "sk-SECRET" not in reply.content
    assert len(payload["error"].encode()) <= 12


async def test_replayed_arguments_are_redacted() -> None:
    seen: list[dict[str, Any]] = []
    p = ScriptedProvider([[call({"t": "key sk-SECRET"})], []])
    await run(p, echo_tool(seen=seen))
    assert seen == [{"t": "key [REDACTED]"}]
    assert "sk-SECRET" not in p.requests[1].messages[1].tool_calls[0].arguments


async def test_transcript_overflow_fails_before_execution() -> None:
    seen: list[dict[str, Any]] = []
    p = ScriptedProvider([[call({"t": "a" * 800})] * 2])
    with pytest.raises(WorkerRunError) as err:
        await run(p, echo_tool(seen=seen), max_worker_message_bytes=1500)
    assert err.value.reason == "message_bytes" and seen == []


async def test_prompt_over_the_cap_fails_before_any_call() -> None:
    p = ScriptedProvider([])
    with pytest.raises(WorkerRunError) as err:
        await run_worker(
            provider=p,
            system="x" * 2000,
            prompt="p",
            tools=[echo_tool()],
            limits=resolve_memory_worker_limits(max_worker_turns=1, max_worker_message_bytes=1024),
        )
    assert err.value.reason == "message_bytes" and p.requests == []


async def test_provider_error_is_redacted_and_bounded() -> None:
    p = ScriptedProvider([[{"error": "boom sk-SECRET " + "x" * 4000}]])
    with pytest.raises(WorkerRunError) as err:
        await run(p, max_worker_error_bytes=64)
    assert err.value.reason == "provider_error"
    assert "sk-SECRET" not in str(err.value) and len(str(err.value).encode()) <= 64


class ClosingProvider:
    def __init__(self) -> None:
        self.closed = False
        self.after = False

    async def generate(self, request: ProviderRequest) -> AsyncGenerator[ProviderEvent, None]:
        try:
            yield ToolCallEvent("a", "nope", "{}")
            self.after = True
            yield TextEvent("more")
            yield ThinkingEvent("x")
            yield DoneEvent()
        finally:
            self.closed = True


async def test_early_stop_closes_the_stream() -> None:
    provider = ClosingProvider()
    with pytest.raises(WorkerRunError):
        await run(provider)
    assert provider.closed and not provider.after


async def test_direct_runs_require_max_turns() -> None:
    with pytest.raises(TypeError):
        await run_observer(provider=ScriptedProvider([]), entries=[])  # type: ignore[call-arg]


async def test_direct_run_accepts_short_limit_names() -> None:
    entry = message_entry("s", "user", "We ship on 2024-06-14.", entry_id="m1")
    p = ScriptedProvider([[call({"observations": []}, name="record_observations")] * 3])
    with pytest.raises(WorkerRunError) as err:
        await run_observer(provider=p, entries=[entry], max_turns=2, max_tool_calls_per_turn=2)
    assert err.value.reason == "tool_calls_per_turn"
