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
