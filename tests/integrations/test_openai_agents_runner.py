"""An SDK ``Runner`` over several turns with ``PrismSession`` and the recall tool, offline.

The model is a fake ``agents.Model`` that records what it is sent and answers from a
script; tracing is disabled, and no OpenAI client is ever made.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from agents import Agent, Model, ModelResponse, RunConfig, Runner, Usage
from agents.models.interface import ModelTracing
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from prism_om.attach import create_observational_memory
from prism_om.integrations.openai_agents import PrismSession, recall_tool
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

Reply = Callable[[list[dict[str, Any]]], Any]


def say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id=f"msg_{abs(hash(text)) % 10**8}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


def call(name: str, arguments: dict[str, Any], call_id: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id=call_id, name=name, arguments=json.dumps(arguments)
    )


class ScriptedModel(Model):
    """Answers each request with the next scripted reply (a function of the input)."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.inputs: list[list[dict[str, Any]]] = []
        self.tools: list[list[str]] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        **_: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        self.tools.append([tool.name for tool in tools])
        output = self.script.pop(0)(items)
        return ModelResponse(output=list(output), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the test runs without streaming")


def memory_id_in(items: list[dict[str, Any]]) -> str:
    system = next(i["content"] for i in items if i.get("role") == "system")
    found = re.search(r"\b[a-f0-9]{12}\b", system)
    assert found, system
    return found.group()


async def test_a_runner_keeps_history_in_the_session_and_recalls_memory(
    store_opener: StoreOpener,
) -> None:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    memory = create_observational_memory(
        observation={**workers, "message_tokens": 1},
        reflection={**workers, "observation_tokens": 10**6},
        context={"recent_messages": 2},
    )
    recalled: list[dict[str, Any]] = []

    def answer_from_recall(items: list[dict[str, Any]]) -> list[Any]:
        output = json.loads(items[-1]["output"])
        recalled.append(output)
        return [say(f"Recalled: {output['sources'][0]['message']['content']}")]

    model = ScriptedModel(
        [
            lambda items: [say("Noted: Atlas 2.4 ships on 2026-03-17.")],
            lambda items: [say("Noted: Leo owns migration 0042.")],
            lambda items: [call("recall", {"id": memory_id_in(items)}, "call_r1")],
            answer_from_recall,
        ]
    )
    store = await store_opener.open()
    try:
        session = PrismSession("runner", store, memory=memory)
        agent = Agent(name="helper", instructions="Be brief.", model=model)
        agent.tools.append(recall_tool(session))
        config = RunConfig(tracing_disabled=True)
        prompts = [
            "Atlas 2.4 ships on Tuesday 2026-03-17.",
            "Leo owns migration 0042 on staging.",
            "When does Atlas ship? Check your memory.",
        ]
        results = [
            await Runner.run(agent, prompt, session=session, run_config=config)
            for prompt in prompts
        ]
        assert results[0].final_output == "Noted: Atlas 2.4 ships on 2026-03-17."
        assert results[2].final_output == "Recalled: Atlas 2.4 ships on Tuesday 2026-03-17."

        # Turn 1 saw only its prompt; later turns saw the memory first, then the window.
        assert model.inputs[0] == [{"role": "user", "content": prompts[0]}]
        third = model.inputs[2]
        assert third[0]["role"] == "system" and "Atlas 2.4 ships" in third[0]["content"]
        assert third[-1] == {"role": "user", "content": prompts[2]}
        assert model.tools[2] == ["recall"]
        assert recalled[0]["found"] is True

        # The session holds every item of the three turns, in order, as the SDK wrote them.
        history = await session.get_items(limit=100)
        kinds = [(i.get("type", "message"), i.get("role")) for i in history]
        assert kinds == [
            ("message", "user"),
            ("message", "assistant"),
            ("message", "user"),
            ("message", "assistant"),
            ("message", "user"),
            ("function_call", None),
            ("function_call_output", None),
            ("message", "assistant"),
        ]
        assert [i["content"] for i in history if i.get("role") == "user"] == prompts
        # The observer read the tool call and its output as ordinary messages.
        roles = [e.role for e in await store.entries("runner") if e.kind == "message"]
        assert roles == ["user", "assistant"] * 2 + ["user", "assistant", "tool", "assistant"]
    finally:
        await store.close()


async def test_the_recall_tool_answers_a_bad_call_with_an_error_the_model_can_read() -> None:
    async with PrismSession("tool", "memory:") as session:
        await session.add_items([{"role": "user", "content": "hello"}])
        tool = recall_tool(session)

        async def ask(arguments: Any) -> Any:
            raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
            return json.loads(await tool.on_invoke_tool(None, raw))  # type: ignore[arg-type]

        assert (await ask({"id": "nothex"}))["error"] == "InvalidIdError"
        assert (await ask({"id": "0" * 12, "cursor": "x"}))["error"] == "AmbiguousInputError"
        assert (await ask("{oops"))["error"] == "InvalidInputError"
        # Nested past the JSON parser's recursion: an answer the model can read, no crash.
        for deep in ("[" * 100_000, '{"id": ' + "[" * 100_000 + "]" * 100_000 + "}"):
            assert (await ask(deep))["error"] == "InvalidInputError"
        assert (await ask({"cursor": "m\x00"}))["error"] == "InvalidIdError"
        assert (await ask({"id": "0" * 12}))["found"] is False
        store = session._store
        assert store is not None
        (message,) = [e for e in await store.entries("tool") if e.kind == "message"]
        page = await ask({"cursor": message.id, "direction": "backward"})
        assert "error" not in page
