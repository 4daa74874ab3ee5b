"""``prism-om mcp --http PORT``: streamable HTTP on 127.0.0.1, guarded against DNS rebinding.

A page in the user's browser that rebinds its own name to 127.0.0.1 sends that name as
``Host`` and its own origin as ``Origin``; both must be refused before any tool runs,
while the SDK's own HTTP client, talking to 127.0.0.1, is served.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from mcp import Client

from prism_om.session import Session
from prism_om.stores import open_store

READ_TOOLS = {"list_sessions", "memory_status", "memory_view", "recall", "search_memory"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "probe", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _listening(port: int, process: asyncio.subprocess.Process) -> None:
    for _ in range(300):
        if process.returncode is not None:
            raise AssertionError(f"the server exited with {process.returncode}")
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise AssertionError("the server never listened")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[int]:
    db = tmp_path / "memory.db"
    async with await open_store(f"sqlite:{db}") as store:
        await Session(store, "s1").append_message("user", "hello over HTTP")
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-m", "prism_om.cli", "mcp", "--db", str(db), "--http", str(port)),
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        await _listening(port, process)
        yield port
    finally:
        process.terminate()
        await process.wait()


# Headers a request carries, and the status it must get. Another port on 127.0.0.1 is
# another program's origin: only this server's own address and port are allowed.
CASES = [
    ({"Host": "attacker.example"}, 421),
    ({"Host": "attacker.example:{port}"}, 421),
    ({"Host": "127.0.0.1:1"}, 421),
    ({"Host": "127.0.0.1:{port}", "Origin": "http://attacker.example"}, 403),
    ({"Host": "127.0.0.1:{port}", "Origin": "http://attacker.example:{port}"}, 403),
    ({"Host": "127.0.0.1:{port}", "Origin": "http://127.0.0.1:1"}, 403),
    ({"Host": "localhost:{port}", "Origin": "http://localhost:{port}"}, 200),
    ({"Host": "127.0.0.1:{port}", "Origin": "http://127.0.0.1:{port}"}, 200),
    ({"Host": "127.0.0.1:{port}"}, 200),
]


async def test_host_and_origin_are_checked(server: int) -> None:
    got = []
    async with httpx.AsyncClient() as client:
        for headers, _ in CASES:
            sent = {k: v.format(port=server) for k, v in headers.items()}
            response = await client.post(
                f"http://127.0.0.1:{server}/mcp", json=INITIALIZE, headers={**ACCEPT, **sent}
            )
            got.append((headers, response.status_code))
    assert got == CASES


async def test_the_sdk_http_client_is_served(server: int) -> None:
    async with Client(f"http://127.0.0.1:{server}/mcp") as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == READ_TOOLS
        result = await client.call_tool("list_sessions", {})
        assert not result.is_error
        assert "s1" in "".join(getattr(part, "text", "") for part in result.content)
