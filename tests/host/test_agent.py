"""The small host: agent turns, tools, context providers and compaction."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from prism_om.entries import SessionEntry
from prism_om.errors import InvalidInputError
from prism_om.host import Agent, AgentTool, CompactionRequest
from prism_om.observational_memory import create_observational_memory_compaction_strategy
from prism_om.providers import ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore


@dataclass(frozen=True)
class Block:
    name: str
    text: str


class FixedBlocks:
    def __init__(self, *blocks: Block) -> None:
        self._blocks = blocks

    async def blocks(self, session: Session) -> Sequence[Block]:
        return self._blocks


async def test_run_appends_user_and_assistant() -> None:
    session = Session(MemoryStore(), "h1")
    provider = ScriptedProvider([[{"text": "Hello "}, {"text": "Dana"}]])
    agent = Agent(session, provider, system="Be brief.")
    reply = await agent.prompt("Hi, I'm Dana")
    assert reply == "Hello Dana"
    entries = await session.entries()
    assert [(e.role, e.message.text() if e.message else "") for e in entries] == [
        ("user", "Hi, I'm Dana"),
        ("assistant", "Hello Dana"),
    ]
    request = provider.requests[0]
    assert request.system == "Be brief."
    assert [m.role for m in request.messages] == ["user"]


async def test_tools_run_and_results_are_replayed_in_pairs() -> None:
    session = Session(MemoryStore(), "h2")
    seen: list[tuple[dict[str, object], str]] = []

    async def add(args: dict[str, object], *, session_id: str) -> dict[str, object]:
        seen.append((args, session_id))
        return {"sum": int(args["a"]) + int(args["b"])}  # type: ignore[call-overload]

    provider = ScriptedProvider(
        [
            [{"tool_call": {"name": "add", "arguments": {"a": 2, "b": 3}}}],
            [{"text": "5"}],
        ]
    )
    agent = Agent(session, provider, tools=[AgentTool.of("add", add)])
    assert await agent.prompt("2+3?") == "5"
    assert seen == [({"a": 2, "b": 3}, "h2")]
    roles = [e.role for e in await session.entries()]
    assert roles == ["user", "assistant", "tool", "assistant"]
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assert second.messages[1].tool_calls[0].id == second.messages[2].tool_call_id


async def test_unknown_tool_becomes_an_error_result() -> None:
    session = Session(MemoryStore(), "h3")
    provider = ScriptedProvider(
        [[{"tool_call": {"name": "nope", "arguments": {}}}], [{"text": "sorry"}]]
    )
    agent = Agent(session, provider)
    await agent.run("do it")
    tool = next(e for e in await session.entries() if e.role == "tool")
    assert "unknown tool" in tool.message.text()  # type: ignore[union-attr]


async def test_recent_messages_block_replaces_the_raw_tail() -> None:
    session = Session(MemoryStore(), "h4")
    await session.append_message("user", "old question")
    await session.append_message("assistant", "old answer")
    provider = ScriptedProvider([[{"text": "ok"}]])
    agent = Agent(
        session,
        provider,
        context_providers=[FixedBlocks(Block("recent-messages", "[user] old question"))],
    )
    await agent.run("new question")
    request = provider.requests[0]
    assert [m.content for m in request.messages] == ["new question"]
    assert "<recent-messages>" in request.system
    without = ScriptedProvider([[{"text": "ok"}]])
    await Agent(session, without).run("again")
    assert [m.content for m in without.requests[0].messages][:2] == ["old question", "old answer"]


async def test_after_compaction_the_provider_sees_summary_and_kept_messages() -> None:
    session = Session(MemoryStore(), "h5")
    for n in range(6):
        await session.append_message("user", f"question {n}")
        answer = await session.append_message("assistant", f"answer {n}")
        if n == 4:
            # Memory covers everything up to here; what follows it is kept verbatim.
            await session.append_custom(
                {"type": "om.observations.recorded", "observations": [], "coversUpToId": answer.id}
            )
    strategy = create_observational_memory_compaction_strategy(keep_recent_entries=2)
    provider = ScriptedProvider([[{"text": "fine"}]])
    agent = Agent(session, provider, compaction_strategy=strategy)
    compaction = await agent.compact()
    assert compaction.kind == "compaction"
    assert compaction.data is not None and compaction.data["trigger"] == "manual"
    await agent.run("next")
    contents = [m.content for m in provider.requests[0].messages]
    assert contents[0].startswith("[Summary of the earlier conversation]")
    assert contents[1:] == ["question 5", "answer 5", "next"]


async def test_a_compaction_keeps_every_message_memory_lacks() -> None:
    # Nothing observed: folding the history away would leave it in neither the summary
    # (empty) nor the request, so every message is kept verbatim.
    session = Session(MemoryStore(), "h5b")
    for n in range(6):
        await session.append_message("user", f"question {n}")
        await session.append_message("assistant", f"answer {n}")
    strategy = create_observational_memory_compaction_strategy(keep_recent_entries=2)
    provider = ScriptedProvider([[{"text": "fine"}]])
    agent = Agent(session, provider, compaction_strategy=strategy)
    await agent.compact()
    await agent.run("next")
    contents = [m.content for m in provider.requests[0].messages]
    expected = [f"{kind} {n}" for n in range(6) for kind in ("question", "answer")]
    assert contents[1:] == [*expected, "next"]


async def test_compaction_request_hook_rewrites_what_is_folded() -> None:
    session = Session(MemoryStore(), "h6")
    for n in range(4):
        await session.append_message("user", f"q{n}")
    seen: list[int] = []

    async def hook(request: CompactionRequest) -> CompactionRequest:
        seen.append(len(request.entries))
        return CompactionRequest(request.session_id, request.entries[:2], request.trigger)

    agent = Agent(session, ScriptedProvider([]), compaction_hooks=[hook])
    strategy = create_observational_memory_compaction_strategy(keep_recent_entries=8)
    entry = await agent.compact(strategy)
    assert seen == [4]
    branch = await session.entries()
    assert entry.data is not None and entry.data["throughEntryId"] == branch[1].id
    # The compaction still lands at the session's leaf.
    assert entry.parent_id == branch[-2].id and branch[-1].id == entry.id


async def test_stream_yields_provider_events() -> None:
    session = Session(MemoryStore(), "h7")
    agent = Agent(session, ScriptedProvider([[{"text": "a"}, {"text": "b"}]]))
    texts = [e.text async for e in agent.stream("go") if isinstance(e, TextEvent)]
    assert texts == ["a", "b"]
    last: SessionEntry = (await session.entries())[-1]
    assert last.message is not None and last.message.text() == "ab"


async def test_bad_prompt_and_missing_strategy_fail_closed() -> None:
    session = Session(MemoryStore(), "h8")
    agent = Agent(session, ScriptedProvider([]))
    with pytest.raises(InvalidInputError):
        await agent.run("   ")
    with pytest.raises(InvalidInputError):
        await agent.compact()
    assert await session.entries() == []


async def test_tool_arguments_nested_past_any_parser_are_kept_raw_and_answered() -> None:
    """Arguments a model nests too deep: stored whole as text (an entry may nest 128
    levels), and the call answered with an error the model reads, not a crash."""
    session = Session(MemoryStore(), "h9")

    async def echo(args: dict[str, object], *, session_id: str) -> dict[str, object]:
        return {"ok": True}

    deep_texts = ("[" * 100_000, '{"a": ' + "[" * 500 + "]" * 500 + "}")
    provider = ScriptedProvider(
        [
            [{"tool_call": {"name": "echo", "arguments": text}} for text in deep_texts],
            [{"text": "done"}],
        ]
    )
    agent = Agent(session, provider, tools=[AgentTool.of("echo", echo)])
    assert await agent.prompt("go") == "done"
    entries = await session.entries()
    (calls,) = [e for e in entries if e.role == "assistant" and e.message and e.message.tool_calls]
    assert calls.message is not None and calls.message.tool_calls is not None
    assert [c.arguments for c in calls.message.tool_calls] == [{"_raw": t} for t in deep_texts]
    results = [e.message.text() for e in entries if e.role == "tool" and e.message]
    assert "nest too deeply" in results[0]
