"""MCP tool arguments: strict types, short redacted errors, no writes to tombstone sessions.

The server is driven in-process through the SDK's own client (the same validation path
the stdio transport takes; tests/mcp/test_mcp_server.py covers the subprocess).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from prism_om.mcp import create_mcp_server
from prism_om.observational_memory.revocation import create_deletion_propagator
from prism_om.session import Session
from prism_om.stores import SessionStore, open_store

SECRET = "sk-live-77aa9e"


async def _call(store: SessionStore, name: str, args: dict[str, Any]) -> tuple[bool, str]:
    server = create_mcp_server(store, secrets=[SECRET], allow_write=True)
    async with Client(server) as client:
        result = await client.call_tool(name, args)
    return result.is_error, "".join(getattr(part, "text", "") for part in result.content)


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    async with await open_store(f"sqlite:{tmp_path / 'm.db'}") as opened:
        session = Session(opened, "s1")
        first = await session.append_message("user", "hello there")
        await session.append_message("assistant", "hi")
        await create_deletion_propagator(opened).propagate("privacy", [first.id], reason="revoked")
        yield opened


async def test_a_refused_argument_is_one_redacted_line(store: SessionStore) -> None:
    failed, text = await _call(store, "memory_view", {"session_id": "s1", "mode": SECRET})
    assert failed
    assert SECRET not in text and "input_value" not in text
    assert "\n" not in text.strip()
    assert text.startswith("InvalidInputError: invalid arguments for memory_view: mode:")
    failed, text = await _call(store, "memory_view", {"mode": "full"})
    assert failed and "session_id: Field required" in text


@pytest.mark.parametrize(
    ("name", "args", "field"),
    [
        ("observe", {"session_id": "s1", "force": "yes"}, "force"),
        ("observe", {"session_id": "s1", "force": 1}, "force"),
        ("list_sessions", {"limit": True}, "limit"),
        ("list_sessions", {"limit": "5"}, "limit"),
        ("search_memory", {"session_id": "s1", "query": "x", "limit": "5"}, "limit"),
        ("recall", {"session_id": "s1", "cursor": "c", "limit": 2.0}, "limit"),
        ("memory_status", {"session_id": 5}, "session_id"),
        ("append_message", {"session_id": "s1", "role": "user", "text": 5}, "text"),
    ],
)
async def test_loose_types_are_refused(
    store: SessionStore, name: str, args: dict[str, Any], field: str
) -> None:
    failed, text = await _call(store, name, args)
    assert failed, text
    assert f"invalid arguments for {name}: {field}" in text


async def test_strict_types_still_take_the_right_ones(store: SessionStore) -> None:
    failed, text = await _call(store, "list_sessions", {"limit": 5})
    assert not failed, text
    failed, text = await _call(store, "observe", {"session_id": "s1", "force": True})
    assert not failed, text


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("append_message", {"session_id": "tombstones.privacy", "role": "user", "text": "x"}),
        ("append_message", {"session_id": "tombstones.new", "role": "user", "text": "x"}),
        ("observe", {"session_id": "tombstones.privacy", "force": True}),
    ],
)
async def test_write_tools_refuse_tombstone_sessions(
    store: SessionStore, name: str, args: dict[str, Any]
) -> None:
    before = {sid: len(await store.list(sid)) for sid in await store.sessions()}
    failed, text = await _call(store, name, args)
    assert failed and "records revocation tombstones" in text
    assert {sid: len(await store.list(sid)) for sid in await store.sessions()} == before


@pytest.mark.parametrize(
    ("name", "args", "unknown"),
    [
        ("recall", {"session_id": "s1", "id": "0" * 12, "sourcesOfset": 100}, "sourcesOfset"),
        ("list_sessions", {"limit": 5, "offset": 10}, "offset"),
        ("memory_view", {"session_id": "s1", "mode": "full", "verbose": True}, "verbose"),
        ("append_message", {"session_id": "s1", "role": "user", "text": "x", "id": "e"}, "id"),
        ("recall", {"session_id": "s1", "id": "0" * 12, SECRET: 1}, "[REDACTED"),
    ],
)
async def test_an_unknown_argument_is_refused_by_name(
    store: SessionStore, name: str, args: dict[str, Any], unknown: str
) -> None:
    before = {sid: len(await store.list(sid)) for sid in await store.sessions()}
    failed, text = await _call(store, name, args)
    assert failed, text
    assert text.startswith(f"InvalidInputError: invalid arguments for {name}: unknown argument")
    assert unknown in text and SECRET not in text
    assert {sid: len(await store.list(sid)) for sid in await store.sessions()} == before


async def test_the_tool_schemas_admit_no_other_argument(store: SessionStore) -> None:
    server = create_mcp_server(store, allow_write=True)
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
    assert len(tools) == 7
    assert all(tool.input_schema.get("additionalProperties") is False for tool in tools)


async def test_arguments_nested_past_any_parser_are_a_tool_error(store: SessionStore) -> None:
    from mcp.server.mcpserver.exceptions import ToolError

    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    server = create_mcp_server(store)
    # In process: the SDK's client cannot even serialise such a value to send it.
    for args in (
        {"session_id": "s1", "cursor": "c", "direction": deep},
        {"session_id": "s1", "cursor": "c", "nested": deep},
        {"session_id": deep},
    ):
        with pytest.raises(ToolError, match="invalid arguments for recall"):
            await server.call_tool("recall", args)
