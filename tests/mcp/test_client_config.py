"""The desktop-client block of ``docs/cli.md`` starts the server: parsed as a client parses it, with
only the store path swapped for a test store and ``prism-om`` found on this environment."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from prism_om.session import Session
from prism_om.stores import open_store

ROOT = Path(__file__).resolve().parent.parent.parent


def _config() -> dict[str, object]:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = page.split("\n## prism-om mcp\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```json\n(.*?)```", section, flags=re.S)
    server: dict[str, object] = json.loads(block)["mcpServers"]["prism-om"]
    return server


def _command(name: str) -> str:
    """The console script beside this interpreter (the environment a client would use)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    assert found, f"{name} is not installed in this environment"
    return found


async def test_the_documented_client_configuration_starts_the_server(tmp_path: Path) -> None:
    config = _config()
    assert config["command"] == "prism-om"
    args = list(config["args"])  # type: ignore[call-overload]
    assert args[:1] == ["mcp"] and "--db" in args
    db = tmp_path / "agent-memory.db"
    async with await open_store(f"sqlite:{db}") as store:
        session = Session(store, "desk")
        await session.append_message("user", "my key is sk-live-your-api-key")
        last = await session.append_message("assistant", "I will keep it to myself.")
    args[args.index("--db") + 1] = str(db)
    env = dict(config["env"])  # type: ignore[call-overload]
    params = StdioServerParameters(
        command=_command("prism-om"), args=args, env={**env, "PATH": os.environ["PATH"]}
    )
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "recall" in names and "append_message" not in names
        result = await client.call_tool("list_sessions", {})
        assert not result.is_error
        assert "desk" in result.content[0].text  # type: ignore[union-attr]
        page = await client.call_tool(
            "recall",
            {"session_id": "desk", "cursor": last.id, "direction": "backward", "detail": "full"},
        )
        text = page.content[0].text  # type: ignore[union-attr]
        # The env block's PRISM_SECRETS reached the server: the key is redacted.
        assert "my key is [REDACTED]" in text and "sk-live-your-api-key" not in text
