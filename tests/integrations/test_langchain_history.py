"""``PrismChatMessageHistory`` under ``RunnableWithMessageHistory``, on every adapter: the
history round-trips, with memory the prompt gets memory + the window, the sync methods
name the async ones, and a reopened store reads the same history."""

from __future__ import annotations

import warnings
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, message_to_dict
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from support.langchain_models import ScriptedChatModel

from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError
from prism_om.integrations.langgraph import PrismChatMessageHistory, recall_tool
from prism_om.stores import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider


def offline_memory() -> Any:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": 1},
        reflection={**workers, "observation_tokens": 10**6},
        context={"recent_messages": 2},
    )


def chain(store: SessionStore, model: ScriptedChatModel, memory: Any) -> Any:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    with warnings.catch_warnings():
        # langchain-core 1.x deprecates it for LangGraph persistence (PrismGraphMemory),
        # but still ships and runs it.
        warnings.simplefilter("ignore", DeprecationWarning)
        return RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: PrismChatMessageHistory(session_id, store, memory=memory),
            input_messages_key="question",
            history_messages_key="history",
        )


QUESTIONS = ["Atlas 2.4 ships on 2026-03-17.", "Leo owns migration 0042.", "When does Atlas ship?"]


async def test_runnable_with_history_round_trips_and_gets_memory(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        model = ScriptedChatModel(replies=[AIMessage(f"Answer {i}.") for i in range(3)])
        runnable = chain(store, model, offline_memory())
        config = {"configurable": {"session_id": "chat-1"}}
        for question in QUESTIONS:
            await runnable.ainvoke({"question": question}, config)
        history = PrismChatMessageHistory("chat-1", store)
        everything = await history.aget_all_messages()
        assert [type(m).__name__ for m in everything] == ["HumanMessage", "AIMessage"] * 3
        assert [m.content for m in everything[::2]] == QUESTIONS
        # The last prompt: the memory, then only the window (not the whole history).
        last = model.seen[-1]
        assert isinstance(last[0], SystemMessage) and "Atlas 2.4 ships" in last[0].content
        assert len(last) < len(everything) + 1
        assert last[-1].content == QUESTIONS[-1]
        entries = [e for e in await store.entries("chat-1") if e.kind == "message"]
        assert [e.role for e in entries] == ["user", "assistant"] * 3
    finally:
        await store.close()
    if store_opener.persistent:
        again = await store_opener.open()
        try:
            reopened = await PrismChatMessageHistory("chat-1", again).aget_all_messages()
            assert [message_to_dict(m) for m in reopened] == [
                message_to_dict(m) for m in everything
            ]
        finally:
            await again.close()


async def test_clear_sync_methods_and_recall() -> None:
    history = PrismChatMessageHistory("c", "memory:")
    try:
        await history.aadd_messages([HumanMessage("Hi"), AIMessage("Hello")])
        assert len(await history.aget_messages()) == 2  # no memory: every message
        for sync in (lambda: history.messages, lambda: history.add_messages([]), history.clear):
            with pytest.raises(InvalidInputError, match="aget_messages"):
                sync()
        assert recall_tool(history).name == "recall"
        await history.aclear()
        assert await history.aget_all_messages() == []
        await history.aadd_messages([HumanMessage("Again")])
        assert [m.content for m in await history.aget_all_messages()] == ["Again"]
    finally:
        await history.close()
