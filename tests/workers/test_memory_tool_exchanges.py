"""A recall (or search) call and its answer are never observed: they restate memory.

Observing them recorded memory of memory: the answer quotes the recalled sources, so
every recall minted another observation of facts already held (in ``PrismSession`` too).
"""

from __future__ import annotations

import json
from typing import Any

from prism_om.attach import create_observational_memory
from prism_om.entries import SessionEntry, message_entry
from prism_om.integrations.openai_agents import PrismSession
from prism_om.stores import open_store
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider
from prism_om.workers.transcript import select_observer_batch

RECALLED = "Quokka billing runs its migration on staging first."


def _exchange(sid: str) -> list[SessionEntry]:
    ask = message_entry(sid, "user", "Which database does billing use? Check your memory.")
    call = message_entry(
        sid,
        "assistant",
        "",
        parent_id=ask.id,
        tool_calls=[{"id": "c1", "name": "recall", "arguments": {"id": "0123456789ab"}}],
    )
    answer = message_entry(
        sid,
        "tool",
        json.dumps({"found": True, "text": RECALLED}),
        parent_id=call.id,
        tool_call_id="c1",
    )
    both = message_entry(
        sid,
        "assistant",
        "Let me also look at the weather.",
        parent_id=answer.id,
        tool_calls=[
            {"id": "c2", "name": "search_memory", "arguments": {"query": "billing"}},
            {"id": "c3", "name": "weather", "arguments": {"city": "Lyon"}},
        ],
    )
    search = message_entry(
        sid, "tool", json.dumps({"matches": [RECALLED]}), parent_id=both.id, tool_call_id="c2"
    )
    weather = message_entry(
        sid, "tool", "12 degrees in Lyon", parent_id=search.id, tool_call_id="c3"
    )
    reply = message_entry(sid, "assistant", "Billing uses PostgreSQL 16.", parent_id=weather.id)
    return [ask, call, answer, both, search, weather, reply]


def test_the_observer_batch_scans_memory_tool_exchanges_without_showing_them() -> None:
    entries = _exchange("s")
    batch = select_observer_batch(entries, budget=100_000)
    assert [e.id for e in batch.scanned] == [e.id for e in entries]  # all covered
    shown = [e.id for e in batch.sources]
    ask, _call, _answer, both, _search, weather, reply = entries
    assert shown == [ask.id, both.id, weather.id, reply.id]
    assert RECALLED not in batch.text and "search_memory" not in batch.text
    assert "weather" in batch.text and "12 degrees in Lyon" in batch.text


def _item_of(entry: SessionEntry) -> list[dict[str, Any]]:
    message = entry.message
    assert message is not None
    if message.role == "user":
        return [{"role": "user", "content": message.text()}]
    if message.role == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": message.tool_call_id,
                "output": message.text(),
            }
        ]
    items: list[dict[str, Any]] = []
    if message.text():
        items.append(
            {
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": message.text(), "annotations": []}],
            }
        )
    for call in message.tool_calls or ():
        items.append(
            {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
            }
        )
    return items


async def test_prism_session_does_not_observe_its_recall_calls() -> None:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    memory = create_observational_memory(
        observation={**workers, "message_tokens": 1},
        reflection={**workers, "observation_tokens": 10**6},
    )
    async with await open_store("memory:") as store:
        session = PrismSession("s", store, memory=memory)
        items = [item for entry in _exchange("s") for item in _item_of(entry)]
        await session.add_items(items)
        ledger = await store.ledger("s")
        texts = [r.observation.text for r in ledger.observations]
        assert texts, "the offline observer recorded nothing"
        assert not any("Quokka" in t for t in texts), texts
        assert any("PostgreSQL 16" in t for t in texts), texts
