"""The session page of a reopened JSONL session reads what it shows, not the session.

Work is counted in message lines parsed and messages tokenised, never in wall-clock
time: the first view of a session four times longer, with the same tail, does the same
work (issue 19: a 100,000-entry session's page under a second).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from prism_om.entries import SessionEntry, entry_from_wire, message_entry
from prism_om.inspect import create_inspect_app
from prism_om.session import Session
from prism_om.stores import open_store
from prism_om.stores.jsonl import loading as jsonl_loading
from prism_om.stores.jsonl import store as jsonl
from prism_om.tokens import TokenEstimator

SID = "long"
BASE = "http://127.0.0.1:8787"


class Work:
    """Message lines parsed by the JSONL store, messages tokenised by anyone."""

    def __init__(self) -> None:
        self.parsed = 0
        self.tokenised = 0


@pytest.fixture
def work(monkeypatch: pytest.MonkeyPatch) -> Work:
    counts = Work()
    count_entry: Callable[[TokenEstimator, SessionEntry], int] = TokenEstimator.count_entry

    def parse(wire: object, *, where: str = "entry") -> SessionEntry:
        entry = entry_from_wire(wire, where=where)
        counts.parsed += entry.kind == "message"
        return entry

    def tokenise(self: TokenEstimator, entry: SessionEntry) -> int:
        counts.tokenised += 1
        return count_entry(self, entry)

    monkeypatch.setattr(jsonl_loading, "entry_from_wire", parse)
    monkeypatch.setattr(TokenEstimator, "count_entry", tokenise)
    return counts


async def _fill(url: str, filler: int) -> None:
    """``filler`` messages, then the same tail: memory over a message, 60 more turns."""
    async with await open_store(url, create=True) as store:
        parent = None
        for start in range(0, filler, 100):
            batch = []
            for i in range(start, min(filler, start + 100)):
                text = f"filler {i} about the billing service"
                batch.append(message_entry(SID, "user", text, parent_id=parent, entry_id=f"f{i}"))
                parent = batch[-1].id
            await store.append_many(batch)
        session = Session(store, SID)
        source = await session.append_message("user", "I deploy on Fridays.")
        observation = {"id": "0123456789ab", "text": "Deploys on Fridays"}
        await session.append_custom(
            {
                "type": "om.observations.recorded",
                "observations": [{**observation, "sourceEntryIds": [source.id]}],
                "coversUpToId": source.id,
            }
        )
        for turn in range(30):
            await session.append_message("user", f"question {turn}")
            await session.append_message("assistant", f"answer {turn}")


async def _first_view(url: str, work: Work) -> tuple[int, int]:
    work.parsed = work.tokenised = 0
    async with await open_store(url, read_only=True) as store:
        app = create_inspect_app(store)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url=BASE) as client:
            page = await client.get(f"/s/{SID}")
    assert page.status_code == 200, page.text[:300]
    assert "Deploys on Fridays" in page.text and "answer 29" in page.text
    return work.parsed, work.tokenised


async def test_the_first_view_does_the_same_work_for_a_longer_session(
    tmp_path: Path, work: Work, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every append rewrites the index sidecar, so it covers the whole file: what is
    # counted is the page's work, not how much of the file a sidecar left unindexed.
    monkeypatch.setattr(jsonl, "_index_due", lambda lines, indexed: lines > indexed)
    seen: dict[int, Any] = {}
    for filler in (300, 1200):
        url = f"jsonl:{tmp_path / str(filler)}"
        await _fill(url, filler)
        seen[filler] = await _first_view(url, work)
    assert seen[300] == seen[1200]
    parsed, tokenised = seen[1200]
    assert parsed < 100  # the page's 50 entries, the recent messages, the leaf
    assert tokenised < 100
