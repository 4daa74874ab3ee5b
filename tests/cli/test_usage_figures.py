"""What memory costs and saves, as ``status``, ``om:status``, MCP and the inspector show it:
tokens per worker (kept in the memory records, so a reopen and a copy to PostgreSQL keep
them) and the next request's tokens against the whole branch's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from support.store_builders import cli

from prism_om.inspect import create_inspect_app
from prism_om.mcp import create_mcp_server
from prism_om.stores import open_store

SID = "atlas-kickoff"


def _status(capsys: pytest.CaptureFixture[str], url: str) -> dict[str, Any]:
    code, out, err = cli(capsys, "status", "--session", SID, "--db", url, "--json")
    assert code == 0, err
    data: dict[str, Any] = json.loads(out)
    return data


def test_status_shows_worker_tokens_and_the_request_against_the_branch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], postgres_url: str
) -> None:
    db = str(tmp_path / "demo.db")
    assert cli(capsys, "demo", "--db", db)[0] == 0
    seen = _status(capsys, db)  # a fresh process's view: the demo's store reopened
    usage, request = seen["usage"], seen["request"]
    observer = usage["workers"]["observer"]
    assert observer["runs"] > 0 and observer["inputTokens"] > 0 and observer["outputTokens"] > 0
    assert observer["estimated"] is True  # the offline workers report no usage
    assert usage["total"]["inputTokens"] == sum(w["inputTokens"] for w in usage["workers"].values())
    assert 0 < request["nextRequestTokens"] < request["branchTokens"]
    assert request["ratio"] == round(request["nextRequestTokens"] / request["branchTokens"], 3)
    code, text, _ = cli(capsys, "status", "--session", SID, "--db", db)
    assert code == 0
    assert "next request:" in text and "worker observer:" in text and "(estimated)" in text

    # The figures live in the entries: a copy keeps them, to PostgreSQL and to JSONL.
    for target in (postgres_url, f"jsonl:{tmp_path / 'copy'}"):
        assert cli(capsys, "copy", "--from", f"sqlite:{db}", "--to", target)[0] == 0
        copied = _status(capsys, target)
        assert copied["usage"] == usage, target
        assert copied["request"] == request, target


def test_mcp_and_the_inspector_show_them_too(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "demo.db"
    assert cli(capsys, "demo", "--db", str(db))[0] == 0
    data, page = asyncio.run(_mcp_and_page(db))
    assert data["usage"]["workers"]["observer"]["runs"] > 0
    assert data["request"]["nextRequestTokens"] > 0
    assert "Tokens the memory workers spent" in page
    assert f"<td>observer</td><td>{data['usage']['workers']['observer']['runs']}</td>" in page
    assert "Next request:" in page


async def _mcp_and_page(db: Path) -> tuple[dict[str, Any], str]:
    async with await open_store(f"sqlite:{db}", read_only=True) as store:
        async with Client(create_mcp_server(store)) as client:
            result = await client.call_tool("memory_status", {"session_id": SID})
        data = json.loads("".join(getattr(p, "text", "") for p in result.content))
        app = create_inspect_app(store, port=8787)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8787") as http:
            page = (await http.get(f"/s/{SID}")).text
    return data, page
