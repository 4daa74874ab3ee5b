"""``status`` names the memory it counts, and says "compacted" right after a compaction."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from support.store_builders import cli

from prism_om.entries import SessionEntry, compaction_entry, message_entry
from prism_om.inspect import create_inspect_app
from prism_om.observational_memory.settings import DEFAULT_COMPACT_AFTER_TOKENS
from prism_om.stores import open_store
from prism_om.tokens import get_estimator


def test_status_prints_the_visible_memory_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "demo.db")
    assert cli(capsys, "demo", "--db", db)[0] == 0
    code, out, _ = cli(capsys, "status", "--session", "atlas-kickoff", "--db", db, "--json")
    assert code == 0
    data = json.loads(out)
    _, view, _ = cli(capsys, "view", "--session", "atlas-kickoff", "--db", db, "--json")
    shown = json.loads(view)
    # The same ids om:view lists, so "an id from status" is one recall accepts.
    assert data["visibleIds"] == {
        "reflectionIds": shown["reflectionIds"],
        "observationIds": shown["observationIds"],
    }
    ids = [*shown["reflectionIds"], *shown["observationIds"]]
    assert ids
    code, text, _ = cli(capsys, "status", "--session", "atlas-kickoff", "--db", db)
    assert code == 0
    assert all(i in text for i in ids)
    assert cli(capsys, "recall", ids[0], "--session", "atlas-kickoff", "--db", db)[0] == 0


def _long_branch(sid: str) -> list[SessionEntry]:
    """Messages past context.compactAfterTokens, then a compaction keeping the last two."""
    est = get_estimator()
    entries: list[SessionEntry] = []
    n = 0
    total = 0
    while total <= DEFAULT_COMPACT_AFTER_TOKENS:
        text = f"turn {n}: " + " ".join(f"word{n}x{i}" for i in range(400))
        entry = message_entry(
            sid,
            "user" if n % 2 == 0 else "assistant",
            text,
            parent_id=entries[-1].id if entries else None,
        )
        entries.append(entry)
        total += est.count_entry(entry)
        n += 1
    kept = [e.id for e in entries[-2:]]
    entries.append(
        compaction_entry(
            sid,
            "The user and the assistant counted words.",
            {"keepEntryIds": kept},
            parent_id=entries[-1].id,
        )
    )
    return entries


@pytest.mark.parametrize("kind", ["sqlite", "jsonl"])
def test_status_and_gauges_say_compacted_right_after_a_compaction(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:{tmp_path / 's.db'}" if kind == "sqlite" else f"jsonl:{tmp_path / 's'}"
    branch = _long_branch("long")
    compaction = branch[-1]

    async def build() -> None:
        async with await open_store(url) as store:
            await store.append_many(branch)

    asyncio.run(build())
    code, out, _ = cli(capsys, "status", "--session", "long", "--db", url, "--json")
    assert code == 0
    seen = json.loads(out)["transcript"]
    assert seen["branchTokens"] > DEFAULT_COMPACT_AFTER_TOKENS  # the branch is over it
    assert seen["compaction"]["entryId"] == compaction.id
    assert seen["compaction"]["entriesAfter"] == 0
    # What the next request replays: the summary and the two kept messages.
    assert 0 < seen["compaction"]["historyTokens"] < DEFAULT_COMPACT_AFTER_TOKENS / 10
    code, text, _ = cli(capsys, "status", "--session", "long", "--db", url)
    line = next(x for x in text.splitlines() if x.startswith("transcript:"))
    assert f"compacted at {compaction.id}" in line and line.endswith(": compacted")

    async def gauges() -> str:
        async with await open_store(url, read_only=True) as store:
            app = create_inspect_app(store, port=8787)
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://127.0.0.1:8787"
            ) as client:
                response = await client.get("/s/long")
                assert response.status_code == 200
                return response.text

    page = asyncio.run(gauges())
    gauge = next(g for g in page.split('<div class="gauge') if "compactAfterTokens" in g)
    assert "history since the compaction" in gauge and ": compacted" in gauge
    assert not gauge.startswith(" over")
