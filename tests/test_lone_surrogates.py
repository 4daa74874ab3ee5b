"""Lone surrogates (issue 13 item 13): refused by the wire model on every adapter, named by
an import (file and line, exit 2, nothing created), and replaced by U+FFFD, with a debug
event, when a provider produces them, so a model reply is never lost."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from prism_om.attach import create_observational_memory
from prism_om.cli.app import main
from prism_om.debug import PROVIDER_TEXT_SANITIZED
from prism_om.entries import message_entry
from prism_om.errors import InvalidEntryError, InvalidInputError
from prism_om.host import Agent, AgentTool
from prism_om.importers import ImportFormatError, import_conversation
from prism_om.providers import ProviderRequest, ScriptedProvider, TextEvent, ToolCallEvent
from prism_om.session import Session
from prism_om.testing.conformance import StoreOpener, snapshot
from prism_om.workers import RECORD_OBSERVATIONS, create_observational_memory_runtime

Events = list[tuple[str, dict[str, Any]]]


def storable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- the wire model ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ("half \ud800", "message.content"),
        ([{"type": "text", "text": "\udfff"}], "message.content[0].text"),
    ],
)
def test_the_wire_model_refuses_a_lone_surrogate_naming_the_field(content: Any, field: str) -> None:
    with pytest.raises(InvalidEntryError, match=rf"field '{re.escape(field)}'.*surrogate"):
        message_entry("s1", "user", content)


def test_tool_call_arguments_and_custom_data_are_checked_too() -> None:
    call = {"id": "c1", "name": "look", "arguments": {"q": ["ok", "\ud83d"]}}
    with pytest.raises(InvalidEntryError, match=r"arguments\.q\[1\]"):
        message_entry("s1", "assistant", "", tool_calls=[call])


async def test_session_append_refuses_alike_on_every_adapter(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = Session(store, "s1")
        await session.append_message("user", "fine")
        before = await snapshot(store)
        with pytest.raises(InvalidEntryError, match=r"message\.content"):
            await session.append_message("assistant", "cut \ud83d")
        assert await snapshot(store) == before
    finally:
        await store.close()


# -- imports --------------------------------------------------------------------------


def bad_transcript(tmp_path: Path) -> Path:
    path = tmp_path / "chat.jsonl"
    lines = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "x"}]
    text = "\n".join(json.dumps(line) for line in lines) + "\n"
    path.write_text(text.replace('"x"', '"half \\ud800 pair"'), encoding="utf-8")
    return path


async def test_an_import_names_the_file_and_line_and_writes_nothing(
    store_opener: StoreOpener, tmp_path: Path
) -> None:
    path = bad_transcript(tmp_path)
    store = await store_opener.open()
    try:
        with pytest.raises(ImportFormatError, match=r"chat\.jsonl: line 2: .*surrogate") as info:
            await import_conversation(store, path)
        assert isinstance(info.value, InvalidInputError)
        assert info.value.line == 2
        assert await store.sessions() == []
    finally:
        await store.close()


@pytest.mark.parametrize("scheme", ["sqlite", "jsonl"])
def test_the_cli_import_exits_2_and_creates_no_store(
    scheme: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = bad_transcript(tmp_path)
    target = tmp_path / ("new.db" if scheme == "sqlite" else "newdir")
    code = main(["import", str(path), "--db", f"{scheme}:{target}"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "chat.jsonl: line 2" in err and "surrogate" in err
    assert "Pydantic" not in err
    assert not target.exists()
    assert not list(tmp_path.glob("new.db*"))


# -- provider text ----------------------------------------------------------------------


async def test_a_reply_ending_in_half_a_pair_is_kept_with_a_replacement_character(
    store_opener: StoreOpener,
) -> None:
    store = await store_opener.open()
    try:
        events: Events = []
        provider = ScriptedProvider([[TextEvent("The answer is 42 "), TextEvent("\ud83d")]])
        agent = Agent(Session(store, "s1"), provider, debug=lambda e, d: events.append((e, d)))
        reply = await agent.run("What is the answer?")
        assert reply.message is not None
        assert reply.message.content == "The answer is 42 \ufffd"
        roles = [e.role for e in await store.entries("s1")]
        assert roles == ["user", "assistant"]
        assert events == [
            (
                PROVIDER_TEXT_SANITIZED,
                {"entryId": reply.id, "role": "assistant", "replacedCharacters": 1},
            )
        ]
    finally:
        await store.close()


async def test_a_pair_split_across_stream_deltas_is_joined_not_replaced() -> None:
    from prism_om.stores.memory import MemoryStore

    events: Events = []
    provider = ScriptedProvider([[TextEvent("smile \ud83d"), TextEvent("\ude00")]])
    agent = Agent(Session(MemoryStore(), "s1"), provider, debug=lambda e, d: events.append((e, d)))
    reply = await agent.run("Smile?")
    assert reply.message is not None and reply.message.content == "smile \U0001f600"
    assert events == []


async def test_tool_calls_and_tool_results_with_surrogates_are_stored(
    store_opener: StoreOpener,
) -> None:
    async def lookup(args: dict[str, Any], *, session_id: str) -> Any:
        return {"found": "row \udc01"}

    store = await store_opener.open()
    try:
        events: Events = []
        provider = ScriptedProvider(
            [
                [
                    ToolCallEvent("call\ud800", "lookup", '{"q": "raw \ud800"}'),
                    ToolCallEvent("c2", "lookup", '{"q": "escaped \\udbff"}'),
                ],
                [TextEvent("done")],
            ]
        )
        agent = Agent(
            Session(store, "s1"),
            provider,
            tools=[AgentTool.of("lookup", lookup)],
            debug=lambda e, d: events.append((e, d)),
        )
        await agent.run("Look it up.")
        branch = await store.entries("s1")
        assert [e.role for e in branch] == ["user", "assistant", "tool", "tool", "assistant"]
        assert all(storable(e.to_json()) for e in branch)
        calls = branch[1].message.tool_calls  # type: ignore[union-attr]
        assert calls is not None
        assert [c.arguments["q"] for c in calls] == ["raw \ufffd", "escaped \ufffd"]
        assert calls[0].id == "call\ufffd"
        assert "row \ufffd" in branch[2].message.text()  # type: ignore[union-attr]
        assert [d["role"] for e, d in events if e == PROVIDER_TEXT_SANITIZED] == [
            "assistant",
            "tool",
            "tool",
        ]
    finally:
        await store.close()


def surrogate_observer(request: ProviderRequest) -> list[dict[str, Any]]:
    """A worker model whose calls hold a raw lone surrogate and an escaped one."""
    if len(request.messages) > 1:
        return []
    from prism_om.workers import parse_transcript

    first = parse_transcript(request.messages[0].content)[0]
    items = [
        {"text": "Launch on Friday \ud83d", "sourceEntryIds": [first.id]},
        {"text": "Owner is Dana ESCAPE", "sourceEntryIds": [first.id]},
    ]
    arguments = json.dumps({"observations": items}, ensure_ascii=False)
    arguments = arguments.replace("ESCAPE", "\\udc00")
    return [{"tool_call": {"name": RECORD_OBSERVATIONS, "arguments": arguments}}]


@pytest.mark.parametrize("debug_log", [True, False])
async def test_a_worker_reply_with_surrogates_still_records_memory(
    store_opener: StoreOpener, debug_log: bool
) -> None:
    store = await store_opener.open()
    try:
        events: Events = []
        session = Session(store, "s1")
        await session.append_message("user", "The launch is on Friday and Dana owns it.")
        runtime = create_observational_memory_runtime(
            session=session,
            append_entry=session.append,
            observation={"provider": ScriptedProvider([surrogate_observer] * 3), "model": "m"},
            settings={"debug_log": debug_log},
            debug=lambda e, d: events.append((e, d)),
        )
        result = await runtime.flush(force=True)
        assert result.status == "completed", result.error
        ledger = await store.ledger("s1")
        texts = sorted(r.observation.text for r in ledger.observations)
        assert texts == ["Launch on Friday \ufffd", "Owner is Dana \ufffd"]
        sanitized = [d for e, d in events if e == PROVIDER_TEXT_SANITIZED]
        if debug_log:
            assert sanitized and all(d["worker"] == "observer" for d in sanitized)
            assert sum(d["replacedCharacters"] for d in sanitized) == 2
        else:
            assert sanitized == []
    finally:
        await store.close()


async def test_an_attached_agent_reports_sanitising_through_memory_debug_sink() -> None:
    from prism_om.stores.memory import MemoryStore
    from prism_om.workers import OfflineMemoryProvider

    events: Events = []
    memory = create_observational_memory(
        {"observation": {"provider": OfflineMemoryProvider(), "model": "offline"}},
        debug=lambda e, d: events.append((e, d)),
        debug_log=True,
    )
    agent = Agent(Session(MemoryStore(), "s1"), ScriptedProvider([[TextEvent("cut \udbff")]]))
    attached = memory.attach(agent)
    reply = await attached.agent.run("Hello there.")
    assert reply.message is not None and reply.message.content == "cut \ufffd"
    assert (PROVIDER_TEXT_SANITIZED, {"entryId": reply.id, "role": "assistant"}) in [
        (e, {k: v for k, v in d.items() if k != "replacedCharacters"}) for e, d in events
    ]
