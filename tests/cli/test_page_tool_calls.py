"""``page --detail full`` shows a tool call's arguments in text mode, as ``--json`` does."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from support.store_builders import cli

from prism_om.entries import message_entry
from prism_om.stores import open_store


def test_full_detail_prints_tool_call_arguments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 's.db'}"
    ask = message_entry("s", "user", "What is the weather in Lyon?", entry_id="s-1")
    call = message_entry(
        "s",
        "assistant",
        "",
        parent_id=ask.id,
        entry_id="s-2",
        tool_calls=[{"id": "c1", "name": "weather", "arguments": {"city": "Lyon", "unit": "C"}}],
    )
    answer = message_entry(
        "s", "tool", "12 degrees", parent_id=call.id, entry_id="s-3", tool_call_id="c1"
    )

    async def build() -> None:
        async with await open_store(url) as store:
            await store.append_many([ask, call, answer])

    asyncio.run(build())
    page = ("page", "--session", "s", "--cursor", "s-1", "--db", url, "--width", "400")
    code, out, _ = cli(capsys, *page, "--detail", "full")
    assert code == 0
    assert 'weather({"city": "Lyon", "unit": "C"})' in out and "weather(…)" not in out
