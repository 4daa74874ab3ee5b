"""A secret nested several JSON levels deep in tool-call arguments leaks nowhere, on every store.

The reviewer's scenarios: a recorded call whose argument holds JSON holding JSON, observed by
``flush(force=True)``; and an agent tool call, followed through the worker requests, the saved
observations and reflections, ``om:view``, ``request_preview`` and pages.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from prism_om import (
    Session,
    ToolCall,
    create_observational_memory_runtime,
    message_entry,
    recall_observational_memory_branch_page,
)
from prism_om.attach import create_observational_memory
from prism_om.host import Agent, AgentTool
from prism_om.providers import ScriptedProvider
from prism_om.stores.base import SessionStore
from prism_om.workers import OfflineMemoryProvider

SECRET = "pa\"ss\\wo'rd-XYZ"
TELLTALE = "rd-XYZ"


def nested(depth: int) -> str:
    """``SECRET`` inside JSON text nested ``depth`` times (``depth`` >= 1)."""
    value: object = {"auth": SECRET}
    for _ in range(depth - 1):
        value = {"body": json.dumps(value)}
    return json.dumps(value)


class SpyProvider(OfflineMemoryProvider):
    """The offline worker, keeping every request it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.requests: list[str] = []

    async def generate(self, request: Any) -> Any:
        self.requests.append(repr(request))
        async for event in super().generate(request):
            yield event


async def saved_memory_text(store: SessionStore, session_id: str) -> str:
    ledger = await store.ledger(session_id)
    texts = [o.observation.text for o in ledger.observations]
    texts += [r.reflection.text for r in ledger.reflections]
    assert texts, "the workers saved nothing: the scenario proves nothing"
    return json.dumps(texts)


@pytest.mark.parametrize("depth", [2, 3, 5])
async def test_recorded_call_with_nested_json_is_observed_redacted(
    store: SessionStore, depth: int
) -> None:
    session = Session(store, "s")
    await session.append_message("user", "start")
    call = ToolCall(id="c", name="http", arguments={"payload": nested(depth)})
    await session.append(message_entry("s", "assistant", "", tool_calls=[call]))
    spy = SpyProvider()
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        observation={"provider": spy, "message_tokens": 1},
        session_model="offline",
        secrets=[SECRET],
    )
    await runtime.flush(force=True)
    assert spy.requests and not any(TELLTALE in r for r in spy.requests)
    saved = await saved_memory_text(store, "s")
    # The offline observer summarises the call (tool and target), not its payload.
    assert "called http" in saved and TELLTALE not in saved
    first = (await store.entries("s"))[0].id
    for detail in ("full", "summary"):
        page = await recall_observational_memory_branch_page(
            store, first, session_id="s", detail=detail, limit=50, secrets=[SECRET]
        )
        assert TELLTALE not in json.dumps(page.to_json())


async def test_agent_tool_call_with_nested_json_leaks_nowhere(store: SessionStore) -> None:
    session = Session(store, "s")
    blob = nested(4)
    script: list[list[dict[str, Any]]] = [
        [{"tool_call": {"id": "c1", "name": "echo", "arguments": {"blob": blob, SECRET: "k"}}}],
        [{"text": f"done {json.dumps(json.dumps(SECRET))}"}],
    ] * 3
    agent = Agent(session, ScriptedProvider(script))

    async def echo(args: Any, **_: Any) -> str:
        return json.dumps({"echo": args, "esc": json.dumps(json.dumps(SECRET))})

    agent.register_tool(AgentTool.of("echo", echo))
    observer, reflector = SpyProvider(), SpyProvider()
    memory = create_observational_memory(
        observation={"provider": observer, "message_tokens": 1},
        reflection={"provider": reflector, "observation_tokens": 1},
        secrets=[SECRET],
    )
    attached = memory.attach(agent, session_model="offline")
    await attached.agent.run(f"please echo {json.dumps(SECRET)}")
    await attached.drain()
    await attached.flush(force=True)

    requests = observer.requests + reflector.requests
    assert requests and not any(TELLTALE in r for r in requests)
    assert TELLTALE not in await saved_memory_text(store, "s")
    assert TELLTALE not in repr(await attached.agent.request_preview("next"))
    for command in attached.commands():
        out = str(await command.run("full" if command.name == "om:view" else "", session_id="s"))
        assert TELLTALE not in out, command.name
    messages = [e for e in await store.entries("s") if e.kind == "message"]
    for detail in ("full", "summary"):
        page = await attached.recall_tool().handler(
            {"cursor": messages[0].id, "detail": detail, "limit": 50}, session_id="s"
        )
        assert TELLTALE not in json.dumps(page)
