"""The opt-in ``search_memory`` agent tool and the Python API beside recall: hits carry
ids the ``recall`` tool expands, arguments are checked before the store is read, a
revocation that lands mid-session is honoured on the next call, secrets never come back
(not even in an error), and ``attached.search_tool()`` sees what the context sees."""

from __future__ import annotations

from typing import Any

import pytest

from prism_om import create_search_memory_tool, search_observational_memory
from prism_om.attach import create_observational_memory
from prism_om.errors import InvalidInputError, LimitExceededError, PageTooLargeError
from prism_om.host import Agent
from prism_om.observational_memory import create_recall_memory_tool
from prism_om.providers import ScriptedProvider
from prism_om.session import Session
from prism_om.stores.base import SessionStore
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OfflineMemoryProvider

SECRET = "tok-7781-zz"


async def story(store: SessionStore) -> dict[str, str]:
    session = Session(store, "s1")
    m1 = await session.append_message("user", "The invoice retry queue stalls on Mondays.")
    m2 = await session.append_message("assistant", f"Use the invoice token {SECRET} to retry.")
    m3 = await session.append_message("user", "Deploys happen on Friday.")
    await session.append_custom(
        {
            "type": "om.observations.recorded",
            "observations": [
                {"id": "b00000000001", "text": "Invoice retry queue stalls on Mondays.",
                 "sourceEntryIds": [m1.id]},
                {"id": "b00000000002", "text": "Deploys happen on Friday.",
                 "sourceEntryIds": [m3.id]},
            ],
            "coversUpToId": m3.id,
        }
    )  # fmt: skip
    await session.append_custom(
        {
            "type": "om.reflections.recorded",
            "reflections": [
                {"id": "c00000000001", "text": "The invoice queue needs watching.",
                 "observationIds": ["b00000000001"]},
            ],
        }
    )  # fmt: skip
    return {"m1": m1.id, "m2": m2.id, "m3": m3.id}


async def test_hits_carry_ids_that_recall_expands() -> None:
    store = MemoryStore()
    ids = await story(store)
    tool = create_search_memory_tool(store=store, secrets=[SECRET])
    recall = create_recall_memory_tool(store=store, secrets=[SECRET])
    assert tool.name == "search_memory" and tool.definition.parameters["required"] == ["query"]
    found = await tool.handler({"query": "invoice queue"}, session_id="s1")
    kinds = {r["kind"]: r for r in found["results"]}
    assert set(kinds) == {"reflection", "observation", "message"}
    reflection = kinds["reflection"]
    assert reflection["sourceEntryIds"] == [ids["m1"]]
    assert reflection["observationIds"] == ["b00000000001"]
    expanded = await recall.handler({"id": reflection["id"]}, session_id="s1")
    assert expanded["found"] is True and expanded["sources"][0]["id"] == ids["m1"]
    message = next(r for r in found["results"] if r["kind"] == "message")
    page = await recall.handler({"cursor": message["id"], "limit": 1}, session_id="s1")
    assert page["messages"]
    assert SECRET not in repr(found)


async def test_arguments_are_checked_and_errors_redacted() -> None:
    store = MemoryStore()
    await story(store)
    tool = create_search_memory_tool(store=store, secrets=[SECRET])
    bad: list[tuple[dict[str, Any], type[Exception]]] = [
        ({}, InvalidInputError),
        ({"query": "x", "page": 2}, InvalidInputError),
        ({"query": "x", "limit": 101}, PageTooLargeError),
        ({"query": "x" * 501}, LimitExceededError),
        ({"query": "x", "kinds": ["memories"]}, InvalidInputError),
    ]
    for args, error in bad:
        with pytest.raises(error):
            await tool.handler(args, session_id="s1")
    with pytest.raises(InvalidInputError) as raised:
        await tool.handler({"query": "x", "kinds": [SECRET]}, session_id="s1")
    assert SECRET not in str(raised.value)
    with pytest.raises(InvalidInputError):
        create_search_memory_tool(store=store, default_limit=101)
    # The secret confirms nothing: no hit, as for a word that is nowhere.
    assert (await tool.handler({"query": SECRET}, session_id="s1"))["results"] == []


async def test_a_revocation_mid_session_is_honoured_on_the_next_call() -> None:
    store = MemoryStore()
    ids = await story(store)
    revoked: set[str] = set()
    tool = create_search_memory_tool(store=store, invalidated_ids=lambda: revoked)
    before = await tool.handler({"query": "invoice"}, session_id="s1")
    assert {r["id"] for r in before["results"]} >= {"b00000000001", "c00000000001", ids["m1"]}
    revoked.add(ids["m1"])
    after = await tool.handler({"query": "invoice"}, session_id="s1")
    assert {r["id"] for r in after["results"]} == {ids["m2"]}
    results = await search_observational_memory(
        store, "s1", "invoice", invalidated_ids=revoked, kinds=["observation", "reflection"]
    )
    assert results.hits == () and results.to_json() == {"query": "invoice", "results": []}


async def test_the_attached_search_tool_sees_what_the_context_sees() -> None:
    store = MemoryStore()
    ids = await story(store)
    memory = create_observational_memory(
        {"observation": {"provider": OfflineMemoryProvider(), "model": "offline"}},
        secrets=[SECRET],
        invalidated_ids=[ids["m3"]],
    )
    attached = memory.attach(
        Agent(Session(store, "s1"), ScriptedProvider([[{"text": "ok"}]])), session_model="offline"
    )
    tool = attached.search_tool()
    found = await tool.handler({"query": "deploys friday invoice token"}, session_id="s1")
    got = {r["id"] for r in found["results"]}
    assert ids["m3"] not in got and "b00000000002" not in got  # withheld like the context
    assert ids["m2"] in got and SECRET not in repr(found)
