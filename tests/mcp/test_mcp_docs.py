"""docs/mcp.md names every tool's arguments with the types the server's schemas give;
the server reports the package version; ``memory_view`` keeps to its token budget."""

from __future__ import annotations

import json
import re
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from prism_om.mcp import create_mcp_server
from prism_om.session import Session
from prism_om.stores import SessionStore, open_store
from prism_om.tokens import get_estimator

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def _doc_type(schema: dict[str, Any]) -> str:
    """A property's type as the doc writes it: ``"a"`` or ``"b"`` for an enum, ``or
    null`` for an optional one."""
    parts = schema.get("anyOf") or [schema]
    words = []
    for part in parts:
        if "enum" in part:
            words.append(" or ".join(f'`"{v}"`' for v in part["enum"]))
        else:
            words.append(part["type"])
    return " or ".join(words)


def _doc_tables() -> dict[str, dict[str, tuple[str, str, str]]]:
    """tool -> argument -> (type, required, default) from the doc's tables."""
    tools: dict[str, dict[str, tuple[str, str, str]]] = {}
    current = None
    for line in DOC.read_text().splitlines():
        heading = re.match(r"## (\w+)", line)
        if heading:
            current = heading.group(1)
            tools[current] = {}
            continue
        row = re.match(r"\| `(\w+)` \| (.+?) \| (yes|no) \|\s*(.*?)\s*\|", line)
        if row and current is not None:
            tools[current][row.group(1)] = (row.group(2), row.group(3), row.group(4))
    return tools


async def test_the_doc_lists_every_tool_argument_with_its_schema_type() -> None:
    documented = _doc_tables()
    async with await open_store("memory:") as store:
        server = create_mcp_server(store, allow_write=True)
        async with Client(server) as client:
            listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == set(documented)
    for tool in listed:
        schema = tool.input_schema
        required = set(schema.get("required", ()))
        expected = {}
        for name, prop in schema["properties"].items():
            default = "" if name in required else f"`{json.dumps(prop.get('default'))}`"
            expected[name] = (_doc_type(prop), "yes" if name in required else "no", default)
        assert documented[tool.name] == expected, tool.name


async def test_the_server_reports_the_package_version() -> None:
    async with await open_store("memory:") as store, Client(create_mcp_server(store)) as client:
        info = client.server_info
    assert info is not None
    assert info.name == "prism-om" and info.version == version("prism-om")


@pytest.fixture
async def long_store(tmp_path: Path) -> Any:
    async with await open_store(f"sqlite:{tmp_path / 'm.db'}") as store:
        session = Session(store, "s1")
        for n in range(120):
            await session.append_message(
                "user", f"Fact {n}: the service number {n} runs on host h{n} in rack {n % 7}."
            )
            await session.append_message("assistant", f"Noted fact {n} about service {n}.")
        from prism_om.workers import OfflineMemoryProvider
        from prism_om.workers.one_model import one_model_runtime

        runtime = one_model_runtime(session, OfflineMemoryProvider(), "offline")
        await runtime.flush(force=True)
        yield store


async def _view(store: SessionStore, **args: Any) -> dict[str, Any]:
    async with Client(create_mcp_server(store)) as client:
        result = await client.call_tool("memory_view", {"session_id": "s1", **args})
    assert not result.is_error, result.content
    text = "".join(getattr(part, "text", "") for part in result.content)
    answer: dict[str, Any] = json.loads(text)
    return answer


async def test_memory_view_keeps_to_its_token_budget(long_store: SessionStore) -> None:
    estimator = get_estimator()
    whole = await _view(long_store, mode="full", max_tokens=200_000)
    assert whole["truncated"] is False
    assert estimator.count(json.dumps(whole, ensure_ascii=False)) > 1000
    for budget in (300, 1000):
        cut = await _view(long_store, mode="full", max_tokens=budget)
        assert estimator.count(json.dumps(cut, ensure_ascii=False)) <= budget
        assert cut["truncated"] is True and cut["omittedIds"] > 0
        # Every id listed is one the text shows, so each can be recalled from it.
        assert cut["observationIds"] and all(i in cut["text"] for i in cut["observationIds"])
        assert cut["text"] and whole["text"].startswith(cut["text"])
    # The default is bounded too.
    default = await _view(long_store, mode="full")
    assert estimator.count(json.dumps(default, ensure_ascii=False)) <= default["maxTokens"]


async def test_a_budget_out_of_range_is_refused(long_store: SessionStore) -> None:
    async with Client(create_mcp_server(long_store)) as client:
        for bad in (10, 10**7):
            result = await client.call_tool("memory_view", {"session_id": "s1", "max_tokens": bad})
            assert result.is_error
            assert "max_tokens must be an integer from 200" in result.content[0].text  # type: ignore[union-attr]
