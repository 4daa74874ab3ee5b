"""How each framework's messages become prism-om messages (the tables of
docs/integrations-langgraph.md and docs/integrations-pydantic-ai.md), and what a revoked
one reads as: pure functions, no store."""

from __future__ import annotations

from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
)
from pydantic_ai.messages import (
    BinaryContent,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from prism_om.integrations.conversation import StoredRecord
from prism_om.integrations.langgraph import messages as lc
from prism_om.integrations.pydantic_ai import messages as pai


def stored(record: object, revoked: bool = False) -> StoredRecord:
    return StoredRecord("rec-1", record, ("m-1",), (), (), revoked=revoked)


def test_langchain_messages_map_to_roles_tool_calls_and_results() -> None:
    image = {"type": "image_url", "image_url": {"url": "https://x/y.png"}}
    human = lc.record_of(HumanMessage(content=[{"type": "text", "text": "Look:"}, image]), 0)
    assert human.entries == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Look:"}, {"type": "text", "text": "[image_url]"}],
        }
    ]
    ai = AIMessage(
        "Checking.", tool_calls=[{"id": "c1", "name": "weather", "args": {"city": "Oslo"}}]
    )
    assert lc.record_of(ai, 1).entries == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}],
        }
    ]
    tool = lc.record_of(ToolMessage("Sunny.", tool_call_id="c1"), 2)
    assert tool.entries == [{"role": "tool", "content": "Sunny.", "tool_call_id": "c1"}]
    assert lc.record_of(SystemMessage("Be brief."), 3).entries == []
    assert lc.record_of(ChatMessage("Hi", role="assistant"), 4).entries[0]["role"] == "assistant"
    # Stored verbatim: reading the record gives the message back.
    assert messages_from_dict([lc.record_of(ai, 1).message]) == [ai]
    # Keyed by id when there is one, else by content.
    assert lc.key_of(HumanMessage("x", id="h1")) == "id:h1"
    assert (
        lc.key_of(HumanMessage("x")) == lc.key_of(HumanMessage("x")) != lc.key_of(HumanMessage("y"))
    )


def test_a_revoked_langchain_message_keeps_its_call_ids_only() -> None:
    ai = AIMessage(
        "PIN 4411",
        id="a1",
        tool_calls=[{"id": "c1", "name": "pin", "args": {"pin": "4411"}}],
        additional_kwargs={"reasoning": "4411"},
    )
    shown = lc.message_of(stored(lc.record_of(ai, 0).message, revoked=True))
    assert isinstance(shown, AIMessage) and shown.content == "[revoked] m-1"
    assert [(c["id"], c["name"], c["args"]) for c in shown.tool_calls] == [("c1", "pin", {})]
    assert "4411" not in str(shown.model_dump())
    tool = lc.message_of(
        stored(lc.record_of(ToolMessage("4411", tool_call_id="c1"), 0).message, True)
    )
    assert (
        isinstance(tool, ToolMessage)
        and tool.tool_call_id == "c1"
        and tool.content == "[revoked] m-1"
    )
    chat = lc.message_of(stored(lc.record_of(ChatMessage("4411", role="user"), 0).message, True))
    assert isinstance(chat, ChatMessage) and chat.role == "user" and "4411" not in str(chat)


def test_pydantic_ai_parts_map_to_roles_tool_calls_and_results() -> None:
    request = ModelRequest(
        parts=[
            SystemPromptPart("Be brief."),
            UserPromptPart(["Look:", BinaryContent(b"\x89PNG", media_type="image/png")]),
            ToolReturnPart("weather", "Sunny.", tool_call_id="c0"),
        ]
    )
    assert pai.record_of(request, 0).entries == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Look:"}, {"type": "text", "text": "[binary]"}],
        },
        {"role": "tool", "content": "Sunny.", "tool_call_id": "c0"},
    ]
    response = ModelResponse(
        parts=[
            ThinkingPart("hmm"),
            TextPart("Checking."),
            ToolCallPart("weather", '{"city": "Oslo"}', tool_call_id="c1"),
        ]
    )
    assert pai.record_of(response, 1).entries == [
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"id": "c1", "name": "weather", "arguments": {"city": "Oslo"}}],
        }
    ]
    assert pai.message_of(stored(pai.record_of(response, 1).message)) == response
    memory = pai.memory_message("memory text", [SystemPromptPart("Be brief.")])
    assert pai.is_memory(memory) and not pai.is_memory(request)


def test_a_revoked_pydantic_ai_message_keeps_its_call_ids_and_system_prompt() -> None:
    request = ModelRequest(
        parts=[
            SystemPromptPart("Be brief."),
            UserPromptPart("PIN 4411"),
            ToolReturnPart("pin", "4411", tool_call_id="c0"),
        ]
    )
    shown = pai.message_of(stored(pai.record_of(request, 0).message, revoked=True))
    assert [p.part_kind for p in shown.parts] == ["system-prompt", "user-prompt", "tool-return"]
    assert shown.parts[0].content == "Be brief."
    assert shown.parts[2].tool_call_id == "c0"
    assert "4411" not in str(shown)
    response = ModelResponse(
        parts=[ThinkingPart("4411"), ToolCallPart("pin", {"pin": "4411"}, tool_call_id="c1")]
    )
    shown_response = pai.message_of(stored(pai.record_of(response, 0).message, revoked=True))
    assert [p.part_kind for p in shown_response.parts] == ["tool-call"]
    assert "4411" not in str(shown_response)
