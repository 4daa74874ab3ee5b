"""``prism-om mcp`` as a client meets it: a subprocess driven by the SDK's own stdio client.

One store with memory, a secret and a revoked message; each test starts the server the
way a desktop client does (``command`` + ``args`` + ``env``) and talks MCP to it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from support.mcp_client import server_params

from prism_om.cli.app import main
from prism_om.observational_memory.revocation import create_deletion_propagator
from prism_om.session import Session
from prism_om.stores import open_store

SECRET = "sk-live-4f9a1c"
READ_TOOLS = {"list_sessions", "memory_status", "memory_view", "recall", "search_memory"}
WRITE_TOOLS = {"append_message", "observe"}
MESSAGES = [
    ("user", "We moved the billing service to PostgreSQL 16 last Friday."),
    ("assistant", "Noted: billing runs on PostgreSQL 16 since Friday."),
    ("user", f"The deploy token is {SECRET}; keep it out of the notes."),
    ("assistant", "Understood, I will not repeat the deploy token."),
    ("user", "Remember that the Lisbon office closes on Thursdays."),
    ("assistant", "Noted: the Lisbon office closes on Thursdays."),
]


async def _build(db: Path) -> dict[str, str]:
    async with await open_store(f"sqlite:{db}") as store:
        session = Session(store, "s1")
        ids = [(await session.append_message(role, text)).id for role, text in MESSAGES]
        await Session(store, "other").append_message("user", "another session")
    observe = ["observe", "--db", str(db), "--session", "s1", "--force", "--json"]
    assert await asyncio.to_thread(main, observe) == 0  # its own event loop
    async with await open_store(f"sqlite:{db}") as store:
        # Revoke the Lisbon exchange: memory resting on it must be withheld everywhere.
        propagator = create_deletion_propagator(store)
        await propagator.propagate("privacy", [ids[4], ids[5]], reason="revoked")
    return {"first": ids[0], "lisbon": ids[4]}


@pytest.fixture
async def store_db(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    db = tmp_path / "memory.db"
    return db, await _build(db)


@asynccontextmanager
async def connected(params: StdioServerParameters) -> AsyncIterator[Client]:
    """The SDK's client over stdio: it spawns the server and ends it on exit."""
    async with Client(params) as client:
        yield client


async def call(client: Client, name: str, args: dict[str, Any]) -> tuple[bool, Any]:
    """(is_error, the JSON result or the error text)."""
    result = await client.call_tool(name, args)
    text = "".join(getattr(part, "text", "") for part in result.content)
    if result.is_error:
        return True, text
    return False, json.loads(text)


async def test_read_only_server_lists_the_read_tools_only(
    store_db: tuple[Path, dict[str, str]],
) -> None:
    db, _ = store_db
    async with connected(server_params(db)) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == READ_TOOLS
        failed, text = await call(client, "append_message", {"session_id": "s1"})
        assert failed and "append_message" in text


async def test_each_tool_answers(store_db: tuple[Path, dict[str, str]]) -> None:
    db, ids = store_db
    async with connected(server_params(db)) as client:
        failed, sessions = await call(client, "list_sessions", {})
        assert not failed
        assert [row["session"] for row in sessions["sessions"]][:2] == ["s1", "other"]

        failed, status = await call(client, "memory_status", {"session_id": "s1"})
        assert not failed and status["observations"]["recorded"] > 0
        assert status["transcript"]["branchTokens"] > 0
        assert status["thresholds"]["observation.messageTokens"] == 10_000

        failed, full = await call(client, "memory_view", {"session_id": "s1", "mode": "full"})
        assert not failed and full["mode"] == "full" and full["observationIds"]
        failed, visible = await call(client, "memory_view", {"session_id": "s1"})
        assert not failed and visible["mode"] == "visible"

        # The billing fact rests only on its own messages, so revoking the Lisbon exchange
        # leaves it searchable (an observation never spans an exchange).
        failed, found = await call(
            client, "search_memory", {"session_id": "s1", "query": "postgresql"}
        )
        assert not failed and found["results"]
        match = next(r for r in found["results"] if r["kind"] == "observation")
        assert "postgresql" in match["text"].lower()
        assert match["sourceEntryIds"] and match["score"] > 0

        failed, recalled = await call(client, "recall", {"session_id": "s1", "id": match["id"]})
        assert not failed and recalled["found"] is True
        assert any("PostgreSQL" in json.dumps(s) for s in recalled["sources"])

        failed, page = await call(
            client, "recall", {"session_id": "s1", "cursor": ids["first"], "limit": 3}
        )
        assert not failed and len(page["messages"]) == 3


async def test_revoked_memory_is_withheld(store_db: tuple[Path, dict[str, str]]) -> None:
    db, ids = store_db
    async with connected(server_params(db)) as client:
        failed, found = await call(client, "search_memory", {"session_id": "s1", "query": "lisbon"})
        assert not failed and found["results"] == []
        failed, page = await call(
            client,
            "recall",
            {"session_id": "s1", "cursor": ids["first"], "limit": 10, "detail": "full"},
        )
        assert not failed
        revoked = [m for m in page["messages"] if m["id"] == ids["lisbon"]]
        assert revoked and revoked[0].get("reason") == "revoked"
        assert "Lisbon" not in json.dumps(revoked)
        # A scope without tombstones withholds nothing: the Lisbon memory is searchable.
    async with connected(server_params(db, "--tombstone-scope", "elsewhere")) as client:
        failed, found = await call(client, "search_memory", {"session_id": "s1", "query": "lisbon"})
        assert not failed and found["results"]


async def test_secrets_are_redacted_in_every_result(
    store_db: tuple[Path, dict[str, str]],
) -> None:
    db, ids = store_db
    async with connected(server_params(db, secrets=f"{SECRET}\n")) as client:
        results = [
            await call(client, "list_sessions", {}),
            await call(client, "memory_status", {"session_id": "s1"}),
            await call(client, "memory_view", {"session_id": "s1", "mode": "full"}),
            await call(client, "search_memory", {"session_id": "s1", "query": "token"}),
            await call(
                client,
                "recall",
                {"session_id": "s1", "cursor": ids["first"], "limit": 10, "detail": "full"},
            ),
        ]
        _, view = results[2]
        for memory_id in view["observationIds"] + view["reflectionIds"]:
            results.append(await call(client, "recall", {"session_id": "s1", "id": memory_id}))
        # The secret cannot be probed by searching for it, nor echoed by an error.
        results.append(await call(client, "search_memory", {"session_id": "s1", "query": SECRET}))
        results.append(await call(client, "recall", {"session_id": "s1", "cursor": SECRET}))
        dumped = json.dumps(results)
        assert SECRET not in dumped
        assert "[REDACTED]" in dumped  # the page of full messages shows where it was
        assert results[-2] == (False, {**results[-2][1], "results": []})
    async with connected(server_params(db)) as client:
        # Without the secret configured it is there: the redaction above did the work.
        _, page = await call(
            client, "recall", {"session_id": "s1", "cursor": ids["first"], "detail": "full"}
        )
        assert SECRET in json.dumps(page)


BAD_CALLS = [
    ("memory_status", {"session_id": "nobody"}, "nobody"),
    ("memory_status", {"session_id": "../etc"}, "session id"),
    ("memory_status", {}, "session_id"),
    ("memory_view", {"session_id": "s1", "mode": "everything"}, "mode"),
    ("recall", {"session_id": "s1", "id": "abc", "cursor": "x"}, "either id"),
    ("recall", {"session_id": "s1"}, "neither"),
    ("recall", {"session_id": "s1", "id": "not-hex"}, "id"),
    ("recall", {"session_id": "s1", "cursor": "ghost", "limit": 500}, "100"),
    ("recall", {"session_id": "s1", "cursor": "ghost"}, "ghost"),
    ("search_memory", {"session_id": "s1", "query": ""}, "query"),
    ("search_memory", {"session_id": "s1", "query": "x" * 501}, "500"),
    ("search_memory", {"session_id": "s1", "query": "a", "limit": 101}, "100"),
    ("search_memory", {"session_id": "s1", "query": "a", "kinds": ["memory"]}, "kinds"),
    ("search_memory", {"session_id": "s1", "query": "a", "limit": 0}, "limit"),
    ("search_memory", {"session_id": "s1", "query": "a", "limit": "ten"}, "limit"),
    ("list_sessions", {"limit": 5000}, "limit"),
]


async def test_bad_inputs_are_tool_errors_and_the_server_stays_up(
    store_db: tuple[Path, dict[str, str]],
) -> None:
    db, _ = store_db
    async with connected(server_params(db)) as client:
        for name, args, says in BAD_CALLS:
            failed, text = await call(client, name, args)
            assert failed, (name, args, text)
            assert says.lower() in text.lower(), (name, args, text)
        failed, sessions = await call(client, "list_sessions", {})
        assert not failed and sessions["total"] >= 2


async def test_allow_write_adds_append_message_and_observe(
    store_db: tuple[Path, dict[str, str]],
) -> None:
    db, _ = store_db
    async with connected(server_params(db, "--allow-write")) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == READ_TOOLS | WRITE_TOOLS
        for role, text in [
            ("user", "Our staging cluster is called Andromeda."),
            ("assistant", "Noted: the staging cluster is Andromeda."),
        ]:
            failed, appended = await call(
                client, "append_message", {"session_id": "s1", "role": role, "text": text}
            )
            assert not failed and appended["entryId"]
        failed, text = await call(
            client, "append_message", {"session_id": "s1", "role": "system", "text": "hi"}
        )
        assert failed and "role" in text
        failed, flushed = await call(client, "observe", {"session_id": "s1", "force": True})
        assert not failed and flushed["status"] == "completed" and flushed["observationIds"]
        failed, found = await call(
            client,
            "search_memory",
            {"session_id": "s1", "query": "andromeda", "kinds": ["observation"]},
        )
        assert not failed and found["results"]
        assert {r["kind"] for r in found["results"]} == {"observation"}
        failed, text = await call(client, "observe", {"session_id": "ghost"})
        assert failed and "ghost" in text


async def test_a_missing_extra_names_both_install_commands(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    await _build_minimal(db)
    code = (
        "import sys; sys.modules['mcp'] = None\n"
        "from prism_om.cli.app import main\n"
        f"sys.exit(main(['mcp', '--db', {str(db)!r}]))\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", code, stderr=asyncio.subprocess.PIPE
    )
    _, err = await process.communicate()
    assert process.returncode != 0
    message = err.decode()
    assert "pip install 'prism-om[mcp]'" in message and "pip install '.[mcp]'" in message


async def _build_minimal(db: Path) -> None:
    async with await open_store(f"sqlite:{db}") as store:
        await Session(store, "s1").append_message("user", "hello")
