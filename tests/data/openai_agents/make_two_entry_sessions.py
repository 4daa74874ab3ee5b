"""Rebuild the ``PrismSession`` fixtures of the two-entry item shape (schema version 4):
``sessions-v4.db`` (SQLite) and ``sessions-v4-jsonl/`` (JSONL), as ``PrismSession``
writes them at schema version 4: every item a verbatim ``openai-agents.item`` custom
entry, preceded, when the item has a message meaning, by a message entry (the text
twice); the item entry names it in ``messageId``. They are the fixture a change to one
entry per item migrates from (issue 30, item 6); today
``tests/integrations/test_openai_agents_item_reads.py`` reads them back.

They were generated with the code of commit d174eeb, exported outside any worktree
(``git archive d174eeb | tar -x -C /tmp/items_base``, then
``PYTHONPATH=/tmp/items_base python tests/data/openai_agents/make_two_entry_sessions.py``).
Do not regenerate them with later code: their point is to be what that code wrote.

Two sessions in each store:

- ``plain``: no memory; every item kind (user text and parts, an assistant output, a
  function call and its output, reasoning, a system item, a hosted-tool call), then a
  ``pop_item()`` (the popped item stays on the branch left behind), a ``clear_session()``
  and two more items on the new branch. ``EXPECTED["plain"]`` is what ``get_items()``
  returned, ``EXPECTED_POPPED`` what the pop returned.
- ``mem``: offline observational memory (observes after every message), two turns: the
  memory's observations cite the message entries as their sources.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

from prism_om.attach import create_observational_memory
from prism_om.integrations.openai_agents import PrismSession
from prism_om.workers import OFFLINE_MODEL, OfflineMemoryProvider

HERE = Path(__file__).resolve().parent
SQLITE = HERE / "sessions-v4.db"
JSONL = HERE / "sessions-v4-jsonl"
EXPECTED_FILE = HERE / "sessions-v4-expected.json"


def reply(text: str, n: int) -> dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


PLAIN_1: list[dict[str, Any]] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Atlas 2.4 ships on Tuesday 2026-03-17."},
    {"id": "rs_1", "type": "reasoning", "summary": [{"type": "summary_text", "text": "Look up."}]},
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "lookup",
        "arguments": '{"release": "Atlas 2.4",  "when": true}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "Atlas 2.4: 2026-03-17"},
    reply("Noted: Atlas ships 2026-03-17.", 1),
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "And this chart?"},
            {"type": "input_image", "image_url": "https://example.com/c.png", "detail": "auto"},
        ],
    },
    {"id": "ws_1", "type": "web_search_call", "status": "completed"},
    reply("The chart shows growth.", 2),
]
PLAIN_2: list[dict[str, Any]] = [
    {"role": "user", "content": "Leo owns migration 0042 on staging."},
    reply("Noted: Leo owns migration 0042.", 3),
]
MEM: list[list[dict[str, Any]]] = [
    [{"role": "user", "content": "Mara moved the standup to 09:30 CET."}, reply("Noted.", 4)],
    [{"role": "user", "content": "The staging database is db-stg-7."}, reply("Noted.", 5)],
]


def offline_memory() -> Any:
    workers = {"provider": OfflineMemoryProvider(), "model": OFFLINE_MODEL}
    return create_observational_memory(
        observation={**workers, "message_tokens": 1},
        reflection={**workers, "observation_tokens": 10**6},
        context={"recent_messages": 2},
    )


async def build(url: str) -> dict[str, Any]:
    expected: dict[str, Any] = {}
    async with PrismSession("plain", url) as session:
        await session.add_items(PLAIN_1)
        expected["popped"] = await session.pop_item()
        expected["after_pop"] = await session.get_items()
        await session.clear_session()
        await session.add_items(PLAIN_2)
        expected["plain"] = await session.get_items()
    async with PrismSession("mem", url, memory=offline_memory()) as session:
        for turn in MEM:
            await session.add_items(turn)
        expected["mem_memory_view"] = await session.get_items()
    async with PrismSession("mem", url) as session:
        expected["mem"] = await session.get_items()
    return expected


def main() -> None:
    SQLITE.unlink(missing_ok=True)
    shutil.rmtree(JSONL, ignore_errors=True)
    from_sqlite = asyncio.run(build(f"sqlite:{SQLITE}"))
    from_jsonl = asyncio.run(build(f"jsonl:{JSONL}"))
    assert from_sqlite["plain"] == from_jsonl["plain"]
    conn = sqlite3.connect(SQLITE)
    # Fold the WAL into the file, so the fixture is one self-contained file.
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.close()
    for name in ("-wal", "-shm"):
        Path(f"{SQLITE}{name}").unlink(missing_ok=True)
    plain = {k: from_sqlite[k] for k in ("plain", "popped", "after_pop", "mem")}
    EXPECTED_FILE.write_text(json.dumps(plain, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
