"""``PrismGraphMemory`` with real LangGraph graphs and a scripted chat model, on every adapter:
messages round-trip, the model gets memory + the window (never a ToolMessage without its
call), revoked text is withheld, the graph's checkpointer keeps its state, and a reopened
store (or a second object) reads the same history."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from support.langchain_models import ScriptedChatModel

from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError
from prism_om.integrations.langgraph import PrismGraphMemory, recall_tool
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

OFFLINE = OfflineMemoryProvider()


def offline_memory(message_tokens: int = 1, recent: int = 2, **options: Any) -> Any:
    workers = {"provider": OFFLINE, "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": message_tokens},
        reflection={**workers, "observation_tokens": 10**6},
        context={"recent_messages": recent},
        **options,
    )


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"Sunny in {city}, 21 C."


def react_agent(model: ScriptedChatModel, memory: PrismGraphMemory, **options: Any) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        # create_react_agent moved to langchain.agents (not installed); its hook is the same.
        warnings.simplefilter("ignore", DeprecationWarning)
        return create_react_agent(
            model,
            [weather, recall_tool(memory)],
            pre_model_hook=memory.pre_model_hook,
            post_model_hook=memory.post_model_hook,
            version="v2",
            **options,
        )


def call(call_id: str, city: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"id": call_id, "name": "weather", "args": {"city": city}}])


def dicts(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    return [message_to_dict(m) for m in messages]


def check_calls_answered(messages: list[BaseMessage]) -> None:
    """Every ToolMessage follows the AIMessage that made its call."""
    called: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            called.update(c["id"] for c in message.tool_calls)
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in called, f"{message.tool_call_id} sent without its call"


async def check_uncovered_sent(store: Any, session_id: str, sent: list[BaseMessage]) -> None:
    """Each message after the observer's coverage is in ``sent`` (by its text)."""
    everything = await store.entries(session_id)
    covered = (await store.ledger(session_id)).observation_covers_up_to_id
    ids = [e.id for e in everything]
    after = everything[ids.index(covered) + 1 :] if covered else everything
    texts = {str(m.content) for m in sent}
    uncovered = [e for e in after if e.kind == "message" and e.message and e.message.text()]
    for entry in uncovered:
        assert entry.message is not None and entry.message.text() in texts


TURNS = [
    "Atlas 2.4 ships on Tuesday 2026-03-17.",
    "Leo owns migration 0042 on staging.",
    "What is the weather in Oslo?",
    "And the freeze is Wednesday 2026-03-11.",
]


def replies() -> list[AIMessage]:
    return [
        AIMessage("Noted: Atlas ships 2026-03-17."),
        AIMessage("Noted: Leo owns 0042."),
        call("call_oslo", "Oslo"),
        AIMessage("It is sunny in Oslo."),
        AIMessage("Noted: freeze on 2026-03-11."),
    ]


async def run_turns(agent: Any, thread: str = "t1") -> dict[str, Any]:
    config = {"configurable": {"thread_id": thread}}
    state: dict[str, Any] = {}
    for text in TURNS:
        state = await agent.ainvoke({"messages": [HumanMessage(text)]}, config)
    return state


async def test_react_agent_round_trip_window_and_reopen(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        memory = PrismGraphMemory("thread-1", store, memory=offline_memory(recent=2))
        model = ScriptedChatModel(replies=replies())
        state = await run_turns(react_agent(model, memory, checkpointer=InMemorySaver()))
        graph_messages = state["messages"]
        # The checkpointer keeps the whole conversation: the hook only rewrote the input.
        assert len(graph_messages) == 10
        assert [m.content for m in graph_messages if isinstance(m, HumanMessage)] == TURNS
        # The session holds every message exactly as the graph has it: roles, tool calls
        # and their ids, the ToolMessage's call id and name.
        stored = await memory.messages()
        assert dicts(stored) == dicts(graph_messages)
        tool_message = next(m for m in stored if isinstance(m, ToolMessage))
        assert tool_message.tool_call_id == "call_oslo"
        # ... and as prism-om messages the observer reads.
        entries = [e for e in await store.entries("thread-1") if e.kind == "message"]
        assert [e.message.role for e in entries if e.message] == [
            "user", "assistant", "user", "assistant", "user", "assistant", "tool",
            "assistant", "user", "assistant",
        ]  # fmt: skip
        (made,) = entries[5].message.tool_calls or []
        assert (made.id, made.name, made.arguments) == ("call_oslo", "weather", {"city": "Oslo"})
        assert entries[6].message.tool_call_id == "call_oslo"

        # The model never got the whole list once memory covered the start.
        last = model.seen[-1]
        assert isinstance(last[0], SystemMessage) and "<observational-memory>" in last[0].content
        assert "Atlas 2.4 ships" in last[0].content
        assert len(last) < len(graph_messages)
        for seen in model.seen:
            check_calls_answered(seen)
        # Every message the observer has not covered reaches the model.
        sent = await memory.model_input(graph_messages)  # nothing new: no worker runs
        await check_uncovered_sent(store, "thread-1", sent)
    finally:
        await store.close()

    if not store_opener.persistent:
        return  # the in-memory store does not outlive its close (a second object: below)
    # A second memory object over the reopened store reads the same history and appends
    # nothing it already holds.
    again = await store_opener.open()
    try:
        second = PrismGraphMemory("thread-1", again, memory=offline_memory(recent=2))
        assert dicts(await second.messages()) == dicts(graph_messages)
        assert await second.add_messages(graph_messages) == 0
        assert await second.add_messages([*graph_messages, HumanMessage("one more", id="h9")])
        assert (await second.messages())[-1].content == "one more"
    finally:
        await again.close()


async def test_every_uncovered_message_reaches_the_model(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        # The observer runs only once 60 tokens wait: coverage lags behind the newest turns.
        memory = PrismGraphMemory("lag", store, memory=offline_memory(60, recent=1))
        model = ScriptedChatModel(replies=replies())
        state = await run_turns(react_agent(model, memory, checkpointer=InMemorySaver()))
        sent = await memory.model_input(state["messages"])
        ledger = await store.ledger("lag")
        assert ledger.observations, "the observer never ran"
        covered = ledger.observation_covers_up_to_id
        assert covered != (await store.entries("lag"))[-1].id, "nothing is uncovered"
        await check_uncovered_sent(store, "lag", sent)
        check_calls_answered(sent)
    finally:
        await store.close()


async def test_without_memory_the_messages_pass_unchanged() -> None:
    async with PrismGraphMemory("plain", "memory:") as memory:
        history = [HumanMessage("Hi", id="h1"), AIMessage("Hello", id="a1")]
        assert await memory.model_input(history) == history
        assert dicts(await memory.messages()) == dicts(history)


async def test_any_graph_uses_model_input_and_reopened_memory(store_opener: StoreOpener) -> None:
    from langgraph.graph import START, MessagesState, StateGraph

    store = await store_opener.open()
    try:
        model = ScriptedChatModel(replies=[AIMessage(f"Reply {i}.") for i in range(4)])
        memory = PrismGraphMemory("plain", store, memory=offline_memory(recent=1))

        async def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(await memory.model_input(state["messages"]))]}

        graph = StateGraph(MessagesState)
        graph.add_node("model", call_model)
        graph.add_edge(START, "model")
        app = graph.compile(checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "plain"}}
        for text in TURNS[:3]:
            await app.ainvoke({"messages": [HumanMessage(text)]}, config)
        # A second memory object (another process's view) continues the same session.
        other = PrismGraphMemory("plain", store, memory=offline_memory(recent=1))

        async def call_other(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(await other.model_input(state["messages"]))]}

        graph2 = StateGraph(MessagesState)
        graph2.add_node("model", call_other)
        graph2.add_edge(START, "model")
        state = await graph2.compile(checkpointer=app.checkpointer).ainvoke(
            {"messages": [HumanMessage(TURNS[3])]}, config
        )
        await other.add_messages(state["messages"])  # the last reply, after the run
        assert dicts(await other.messages()) == dicts(state["messages"])
        assert len(await other.messages()) == 8  # nothing stored twice
        last = model.seen[-1]
        assert "Atlas 2.4 ships" in last[0].content  # from memory, not the window
        assert last[-1].content == TURNS[3]
    finally:
        await store.close()


async def test_revoked_messages_reach_the_model_without_their_text(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    revoked: set[str] = set()
    try:
        memory = PrismGraphMemory(
            "rev", store, memory=offline_memory(10**6, recent=4, invalidated_ids=lambda: revoked)
        )
        history = [
            HumanMessage("My PIN is 4411.", id="h1"),
            call("c9", "Oslo"),
            ToolMessage("PIN is 4411", tool_call_id="c9", id="t1"),
        ]
        await memory.add_messages(history)
        entries = [e for e in await store.entries("rev") if e.kind == "message"]
        revoked.update({entries[0].id, entries[2].id})
        sent = await memory.model_input([*history, HumanMessage("What now?", id="h2")])
        assert "4411" not in json.dumps(dicts(sent)).replace(entries[0].id, "").replace(
            entries[2].id, ""
        )
        assert sent[0].content == f"[revoked] {entries[0].id}"
        assert isinstance(sent[2], ToolMessage) and sent[2].tool_call_id == "c9"
        check_calls_answered(sent)
        assert all("PIN is 4411" not in str(m.content) for m in await memory.messages())
    finally:
        await store.close()


async def test_a_tool_message_whose_call_is_nowhere_is_left_out() -> None:
    async with PrismGraphMemory("stray", "memory:", memory=offline_memory(recent=2)) as memory:
        history = [
            HumanMessage("Run migration 0042.", id="h1"),
            ToolMessage("Done: 3 rows.", tool_call_id="c404", id="t1"),
            AIMessage("Migration 0042 finished cleanly.", id="a1"),
        ]
        sent = await memory.model_input(history)
        check_calls_answered(sent)
        assert not any(isinstance(m, ToolMessage) for m in sent)
        assert sent[-1].content == "Migration 0042 finished cleanly."


async def test_recall_tool_pages_and_refuses_as_json() -> None:
    async with PrismGraphMemory("recall", "memory:", memory=offline_memory(10**6)) as memory:
        await memory.add_messages([HumanMessage("Atlas ships 2026-03-17.", id="h1")])
        store = await memory.ready()
        (first,) = [e for e in await store.entries("recall") if e.kind == "message"]
        tool_ = recall_tool(memory)
        assert tool_.name == "recall"
        page = json.loads(await tool_.ainvoke({"cursor": first.id, "direction": "backward"}))
        assert page["messages"] == [] or "Atlas" in json.dumps(page)
        page = json.loads(await tool_.ainvoke({"cursor": first.id, "limit": 5, "detail": "full"}))
        assert "messages" in page
        refused = json.loads(await tool_.ainvoke({"cursor": first.id, "limit": 500}))
        assert refused["error"] in {"PageTooLargeError", "InvalidInputError"}
        missing = json.loads(await tool_.ainvoke({"id": "abcdefabcdef"}))
        assert missing["found"] is False


async def test_bad_input_is_refused_before_anything_is_stored() -> None:
    async with PrismGraphMemory("bad", "memory:") as memory:
        with pytest.raises(InvalidInputError, match="message 1"):
            await memory.add_messages([HumanMessage("ok", id="h1"), "not a message"])  # type: ignore[list-item]
        assert await memory.messages() == []
        with pytest.raises(InvalidInputError):
            recall_tool(object())  # type: ignore[arg-type]


async def test_the_same_message_id_in_two_sessions_is_stored_in_each() -> None:
    async with PrismGraphMemory("one", "memory:") as one:
        store = await one.ready()
        two = PrismGraphMemory("two", store)
        message = HumanMessage("Shared greeting.", id="h1")
        assert await one.add_messages([message]) == 1
        assert await two.add_messages([message]) == 1  # keys are per session
        assert await one.add_messages([message]) == 0
        assert [m.content for m in await two.messages()] == ["Shared greeting."]


async def test_a_window_starting_at_a_tool_message_reaches_back_to_its_call(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        memory = PrismGraphMemory("calls", store, memory=offline_memory(recent=1))
        both = AIMessage(
            "",
            id="a2",
            tool_calls=[
                {"id": "c1", "name": "weather", "args": {"city": "Oslo"}},
                {"id": "c2", "name": "weather", "args": {"city": "Bergen"}},
            ],
        )
        history = [
            HumanMessage("Atlas 2.4 ships on 2026-03-17.", id="h1"),
            AIMessage("Noted.", id="a1"),
            HumanMessage("Weather in Oslo and Bergen?", id="h2"),
            both,
            ToolMessage("Sunny in Oslo.", tool_call_id="c1", id="t1"),
            ToolMessage("Rain in Bergen.", tool_call_id="c2", id="t2"),
        ]
        sent = await memory.model_input(history)
        assert (await store.ledger("calls")).observations
        assert "<observational-memory>" in sent[0].content
        # The last message alone is the recent window; it answers c2, made by `both`,
        # so the window starts there and keeps c1's answer between them.
        assert [m.id for m in sent[1:]] == ["a2", "t1", "t2"]
        check_calls_answered(sent)
    finally:
        await store.close()
