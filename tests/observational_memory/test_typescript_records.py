"""Records in the specification's own shape (as the TypeScript package writes them) are read.

An observation there carries only ``id``, ``text`` and ``sourceEntryIds``: on read,
``observedAt`` is the newest source entry's timestamp and ``priority`` is ``medium``, the
same on every adapter (SQLite dates its fold rows at append; the others in the fold).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from prism_om import render_observational_memory
from prism_om.attach import create_observational_memory
from prism_om.entries import SessionEntry
from prism_om.host import Agent
from prism_om.observational_memory import (
    build_observational_memory_context_blocks,
    fold_observational_memory_ledger,
    recall_observational_memory,
)
from prism_om.observational_memory.recall_tool import create_recall_memory_tool
from prism_om.providers import ScriptedProvider, TextEvent
from prism_om.session import Session
from prism_om.stores.memory import MemoryStore
from prism_om.testing.conformance import StoreOpener
from prism_om.workers import OfflineMemoryProvider

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "typescript_records.jsonl"
SID = "ts-session"


def fixture_entries() -> list[SessionEntry]:
    lines = FIXTURE.read_text(encoding="utf-8").splitlines()
    return [SessionEntry.model_validate_json(line) for line in lines if line.strip()]


@pytest.mark.parametrize("batch", [True, False], ids=["append_many", "append"])
async def test_spec_shaped_records_fold_render_and_recall(
    store_opener: StoreOpener, batch: bool
) -> None:
    entries = fixture_entries()
    store = await store_opener.open()
    try:
        if batch:
            await store.append_many(entries)
        else:
            for entry in entries:
                await store.append(entry)
        ledger = await store.ledger(SID)
        # The same ledger as the pure reference fold, on every adapter.
        assert ledger == fold_observational_memory_ledger(entries)
        dated = {r.id: r.observation for r in ledger.observations}
        # Dated by the newest source, whatever order the sources are listed in.
        assert dated["aaaaaaaaaaaa"].observed_at == "2026-03-02T09:00:05.000Z"
        assert dated["bbbbbbbbbbbb"].observed_at == "2026-03-03T14:30:09.000Z"
        assert {o.priority for o in dated.values()} == {"medium"}
        assert [r.reflection.priority for r in ledger.reflections] == ["medium"]
        # The spec-shaped compaction folded and trimmed one observation.
        assert ledger.dropped_observation_ids == ("bbbbbbbbbbbb",)
        # Read views are derived; the stored record stays as it was written.
        stored = await store.get("r1")
        assert stored is not None and stored.data is not None
        assert all("observedAt" not in o for o in stored.data["observations"])

        text = render_observational_memory(
            [r.reflection for r in ledger.reflections], list(dated.values())
        )
        assert "[aaaaaaaaaaaa]" in text and "[cccccccccccc]" in text and "2026-03-03" in text
        blocks = await build_observational_memory_context_blocks(
            store, session_id=SID, keep_recent_entries=2
        )
        memory = next(b for b in blocks if b.name == "observational-memory")
        assert "aaaaaaaaaaaa" in memory.memory_ids and "cccccccccccc" in memory.memory_ids

        # Trimmed by the compaction, not revoked: its sources are still recalled.
        recalled = await recall_observational_memory(store, "bbbbbbbbbbbb", session_id=SID)
        assert recalled.found
        assert {s["id"] for s in recalled.to_json()["sources"]} == {"m3", "m4"}
        reflection = await recall_observational_memory(store, "cccccccccccc", session_id=SID)
        assert reflection.found
        tool = create_recall_memory_tool(store=store)
        answer = await tool.handler({"id": "aaaaaaaaaaaa"}, session_id=SID)
        assert answer["found"] is True
    finally:
        await store.close()


async def test_our_workers_write_observed_at_and_priority() -> None:
    session = Session(MemoryStore(), "ours")
    agent = Agent(session, ScriptedProvider([[TextEvent("Noted.")]] * 4))
    offline = OfflineMemoryProvider()
    memory = create_observational_memory(
        {"observation": {"provider": offline, "model": "offline", "message_tokens": 1}}
    )
    attached = memory.attach(agent)
    await attached.agent.run("Dana owns the billing migration; it ships on 2026-04-15.")
    records = [
        e for e in await session.store.list("ours") if e.custom_type == "om.observations.recorded"
    ]
    written = [o for r in records for o in (r.data or {})["observations"]]
    assert written and all("observedAt" in o and "priority" in o for o in written)
