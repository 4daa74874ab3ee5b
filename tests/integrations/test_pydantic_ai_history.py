"""``PrismHistory`` with real PydanticAI agents (``FunctionModel``, ``TestModel``), on every
adapter: messages round-trip through ``ModelMessagesTypeAdapter``, the model gets memory +
the window (never a tool return without its call), revoked text is withheld, every
uncovered message reaches the model, and a reopened store reads the same history."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    CompactionPart,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError
from prism_om.integrations.pydantic_ai import PrismHistory, recall_tool
from prism_om.stores import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider


def offline_memory(message_tokens: int = 1, recent: int = 2, **options: Any) -> Any:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": message_tokens},
        reflection={**workers, "observation_tokens": 10**6},
        context={"recent_messages": recent},
        **options,
    )


PROMPTS = [
    "Atlas 2.4 ships on Tuesday 2026-03-17.",
    "Leo owns migration 0042 on staging.",
    "What is the weather in Oslo?",
    "And the freeze is Wednesday 2026-03-11.",
]


class Scripted:
    """A FunctionModel body: calls ``weather`` when asked about weather, else notes; it
    records every request's messages."""

    def __init__(self) -> None:
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.seen.append(messages)
        last = messages[-1].parts[-1]
        if isinstance(last, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"Tool said: {last.content}")])
        if isinstance(last, UserPromptPart) and "weather" in str(last.content):
            return ModelResponse(
                parts=[ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="call_oslo")]
            )
        return ModelResponse(parts=[TextPart(f"Noted: {last.content if last else ''}")])


def agent_for(history: PrismHistory, script: Scripted) -> Agent[None, str]:
    agent = Agent(
        FunctionModel(script),
        system_prompt="Be brief.",
        capabilities=[history.capability()],
        tools=[recall_tool(history)],
    )

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"Sunny in {city}, 21 C."

    return agent


async def run_prompts(history: PrismHistory, script: Scripted) -> list[ModelMessage]:
    agent = agent_for(history, script)
    messages: list[ModelMessage] = []
    for prompt in PROMPTS:
        result = await agent.run(prompt, message_history=messages)
        messages = result.all_messages()
    return messages


def dump(messages: list[ModelMessage]) -> Any:
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def check_calls_answered(messages: list[ModelMessage]) -> None:
    called: set[str] = set()
    for message in messages:
        for part in message.parts:
            if isinstance(part, ToolCallPart):
                called.add(part.tool_call_id)
            if isinstance(part, ToolReturnPart):
                assert part.tool_call_id in called, f"{part.tool_call_id} sent without its call"


def texts(messages: list[ModelMessage]) -> set[str]:
    return {str(getattr(p, "content", "")) for m in messages for p in m.parts}


async def check_uncovered_sent(store: SessionStore, sid: str, sent: list[ModelMessage]) -> None:
    everything = await store.entries(sid)
    covered = (await store.ledger(sid)).observation_covers_up_to_id
    ids = [e.id for e in everything]
    after = everything[ids.index(covered) + 1 :] if covered else everything
    shown = texts(sent)
    for entry in after:
        if entry.kind == "message" and entry.message and entry.message.role != "assistant":
            assert entry.message.text() in shown, entry.message.text()


async def test_runs_round_trip_and_the_model_gets_memory_and_window(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        history = PrismHistory("chat-1", store, memory=offline_memory(recent=2))
        script = Scripted()
        await run_prompts(history, script)
        stored = await history.messages()
        kinds = [(m.kind, [p.part_kind for p in m.parts]) for m in stored]
        assert kinds == [
            ("request", ["system-prompt", "user-prompt"]),
            ("response", ["text"]),
            ("request", ["user-prompt"]),
            ("response", ["text"]),
            ("request", ["user-prompt"]),
            ("response", ["tool-call"]),
            ("request", ["tool-return"]),
            ("response", ["text"]),
            ("request", ["user-prompt"]),
            ("response", ["text"]),
        ]
        assert [
            m.parts[-1].content for m in stored[::2] if m.parts[-1].part_kind == "user-prompt"
        ] == PROMPTS
        call = stored[5].parts[0]
        assert isinstance(call, ToolCallPart) and call.tool_call_id == "call_oslo"
        assert call.args_as_dict() == {"city": "Oslo"}
        answer = stored[6].parts[0]
        assert isinstance(answer, ToolReturnPart) and answer.tool_call_id == "call_oslo"
        # ModelMessagesTypeAdapter round trip: the JSON gives back equal messages.
        again = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(stored))
        assert again == stored
        # The observer's messages: roles and the tool call with its id.
        entries = [e for e in await store.entries("chat-1") if e.kind == "message"]
        assert [e.role for e in entries] == [
            "user", "assistant", "user", "assistant", "user", "assistant", "tool",
            "assistant", "user", "assistant",
        ]  # fmt: skip
        (made,) = entries[5].message.tool_calls or []
        assert (made.id, made.name, made.arguments) == ("call_oslo", "weather", {"city": "Oslo"})
        assert entries[6].message.tool_call_id == "call_oslo"

        last = script.seen[-1]
        memory = [p for m in last for p in m.parts if isinstance(p, CompactionPart)]
        assert memory and "Atlas 2.4 ships" in (memory[0].content or "")
        assert sum(len(m.parts) for m in last) < sum(len(m.parts) for m in stored)
        for seen in script.seen:
            check_calls_answered(seen)
        assert "Be brief." in json.dumps(dump(last))  # the system prompt stays
        sent = await history.process(stored)  # nothing new: no worker runs
        await check_uncovered_sent(store, "chat-1", sent)
    finally:
        await store.close()
    if not store_opener.persistent:
        return
    reopened = await store_opener.open()
    try:
        second = PrismHistory("chat-1", reopened, memory=offline_memory(recent=2))
        assert dump(await second.messages()) == dump(stored)
        assert await second.add_messages(stored) == 0
    finally:
        await reopened.close()


async def test_every_uncovered_message_reaches_the_model(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        history = PrismHistory("lag", store, memory=offline_memory(60, recent=1))
        script = Scripted()
        messages = await run_prompts(history, script)
        ledger = await store.ledger("lag")
        assert ledger.observations, "the observer never ran"
        assert ledger.observation_covers_up_to_id != (await store.entries("lag"))[-1].id
        sent = await history.process(messages)
        await check_uncovered_sent(store, "lag", sent)
        check_calls_answered(sent)
    finally:
        await store.close()


async def test_a_second_history_object_continues_the_session(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        first = PrismHistory("two", store, memory=offline_memory(10**6))
        agent = Agent(TestModel(call_tools=[]), capabilities=[first.capability()])
        await agent.run("Atlas ships on 2026-03-17.")
        # Another process's object: it reloads message_history from the session.
        second = PrismHistory("two", store, memory=offline_memory(10**6))
        loaded = await second.messages()
        assert len(loaded) == 2
        agent2 = Agent(TestModel(call_tools=[]), capabilities=[second.capability()])
        result = await agent2.run("Who owns 0042?", message_history=loaded)
        assert dump(await second.messages()) == dump(result.all_messages())
        assert len(await second.messages()) == 4  # nothing stored twice
    finally:
        await store.close()


async def test_revoked_messages_keep_their_place_not_their_text(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    revoked: set[str] = set()
    try:
        history = PrismHistory(
            "rev", store, memory=offline_memory(10**6, recent=4, invalidated_ids=lambda: revoked)
        )
        conversation: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("My PIN is 4411.")]),
            ModelResponse(parts=[ToolCallPart("pin", {"pin": "4411"}, tool_call_id="c9")]),
            ModelRequest(parts=[ToolReturnPart("pin", "PIN is 4411", tool_call_id="c9")]),
        ]
        await history.add_messages(conversation)
        entries = [e for e in await store.entries("rev") if e.kind == "message"]
        revoked.update({entries[0].id, entries[1].id, entries[2].id})
        sent = await history.process(
            [*conversation, ModelRequest(parts=[UserPromptPart("What now?")])]
        )
        text = json.dumps(dump(sent))
        for entry in entries:
            text = text.replace(entry.id, "")
        assert "4411" not in text
        check_calls_answered(sent)
        assert sent[0].parts[0].content == f"[revoked] {entries[0].id}"
        assert json.dumps(dump(await history.messages())).count("4411") == 0
    finally:
        await store.close()


async def test_a_tool_return_whose_call_is_nowhere_is_left_out() -> None:
    async with PrismHistory("stray", "memory:", memory=offline_memory(recent=2)) as history:
        conversation: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("Run migration 0042.")]),
            ModelRequest(parts=[ToolReturnPart("migrate", "Done: 3 rows.", tool_call_id="c404")]),
            ModelResponse(parts=[TextPart("Migration 0042 finished cleanly.")]),
        ]
        sent = await history.process(conversation)
        check_calls_answered(sent)
        assert not any(isinstance(p, ToolReturnPart) for m in sent for p in m.parts)


async def test_recall_tool_answers_the_model() -> None:
    async with PrismHistory("recall", "memory:") as history:
        await history.add_messages([ModelRequest(parts=[UserPromptPart("Atlas ships 03-17.")])])
        store = await history.ready()
        (first,) = [e for e in await store.entries("recall") if e.kind == "message"]
        answers: list[str] = []

        def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            last = messages[-1].parts[-1]
            if isinstance(last, ToolReturnPart):
                answers.append(str(last.content))
                return ModelResponse(parts=[TextPart("done")])
            args = {"cursor": first.id, "direction": "forward", "limit": 500}
            if answers:
                args["limit"] = 5
            return ModelResponse(parts=[ToolCallPart("recall", args, tool_call_id="r1")])

        agent = Agent(FunctionModel(model), tools=[recall_tool(history)])
        await agent.run("recall please")
        refused = json.loads(answers[0])
        assert refused["error"] == "PageTooLargeError"
        with pytest.raises(InvalidInputError):
            recall_tool(object())  # type: ignore[arg-type]


async def test_without_memory_the_messages_pass_unchanged() -> None:
    async with PrismHistory("plain", "memory:") as history:
        conversation: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart("Hi")])]
        assert await history.process(conversation) == conversation
        assert await history.messages() == conversation
        with pytest.raises(InvalidInputError, match="message 0"):
            await history.add_messages(["not a message"])  # type: ignore[list-item]


async def test_a_window_starting_at_a_tool_return_reaches_back_to_its_call(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        history = PrismHistory("calls", store, memory=offline_memory(recent=1))
        conversation: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("Atlas 2.4 ships on 2026-03-17.")]),
            ModelResponse(parts=[TextPart("Noted.")]),
            ModelRequest(parts=[UserPromptPart("Weather in Oslo and Bergen?")]),
            ModelResponse(
                parts=[
                    ToolCallPart("weather", {"city": "Oslo"}, tool_call_id="c1"),
                    ToolCallPart("weather", {"city": "Bergen"}, tool_call_id="c2"),
                ]
            ),
            ModelRequest(
                parts=[
                    ToolReturnPart("weather", "Sunny in Oslo.", tool_call_id="c1"),
                    ToolReturnPart("weather", "Rain in Bergen.", tool_call_id="c2"),
                ]
            ),
        ]
        sent = await history.process(conversation)
        assert (await store.ledger("calls")).observations
        assert isinstance(sent[0].parts[-1], CompactionPart)
        # The last message (c2's return) is the recent window; the window reaches back
        # to the response making both calls, and the request holds both returns.
        assert sent[1:] == conversation[3:]
        check_calls_answered(sent)
    finally:
        await store.close()
