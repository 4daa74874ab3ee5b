"""The framework integrations stay optional: without the framework, importing one names
the extra to install; and their memory work (background, failing workers) never fails
the framework's call."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, UserPromptPart

from prism_om.attach import create_observational_memory
from prism_om.integrations.langgraph import PrismGraphMemory
from prism_om.integrations.pydantic_ai import PrismHistory
from prism_om.providers import ScriptedProvider
from prism_om.stores.memory import MemoryStore
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider


@pytest.mark.parametrize(
    ("module", "missing", "extra"),
    [
        ("prism_om.integrations.langgraph", "langgraph", "langgraph"),
        ("prism_om.integrations.langgraph", "langchain_core", "langgraph"),
        ("prism_om.integrations.pydantic_ai", "pydantic_ai", "pydantic-ai"),
    ],
)
def test_a_missing_framework_names_its_extra(module: str, missing: str, extra: str) -> None:
    script = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        f"try:\n    import {module}\nexcept ImportError as exc:\n    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'prism-om[{extra}]'" in done.stdout


def background_memory() -> Any:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": 1}, background=True
    )


async def test_background_memory_runs_after_the_call_and_close_drains_it() -> None:
    graph = PrismGraphMemory("bg", "memory:", memory=background_memory())
    history = [HumanMessage("Atlas ships 2026-03-17.", id="h1"), AIMessage("Noted.", id="a1")]
    sent = await graph.model_input(history)
    assert [m.content for m in sent] == [m.content for m in history]  # nothing is lost
    store = await graph.ready()
    await graph.drain()
    assert (await store.ledger("bg")).observations
    await graph.close()

    async with MemoryStore() as pai_store:
        agent_history = PrismHistory("bg2", pai_store, memory=background_memory())
        conversation = [
            ModelRequest(parts=[UserPromptPart("Leo owns 0042.")]),
            ModelResponse(parts=[TextPart("Noted.")]),
        ]
        await agent_history.add_messages(conversation)
        await agent_history.close()  # waits for the scheduled work (the store stays open)
        assert (await pai_store.ledger("bg2")).observations


async def test_a_failing_worker_never_fails_the_call() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    broken = ScriptedProvider([[{"error": "model exploded"}]] * 10)
    memory = create_observational_memory(
        observation={"provider": broken, "model": "x", "message_tokens": 1},
        debug=lambda event, data: events.append((event, data)),
    )
    async with PrismHistory("broken", "memory:", memory=memory) as history:
        conversation = [ModelRequest(parts=[UserPromptPart("Atlas ships 2026-03-17.")])]
        assert await history.process(conversation) == conversation
        assert history.runtime is not None and "exploded" in (history.runtime.last_error or "")
    assert any("exploded" in str(data) for _, data in events)
