"""Work done per turn by the store's context blocks (issue 16, the capped-pool workload).

Counted, never timed: the tokens encoded for the blocks' counts, on every adapter.
"""

from __future__ import annotations

from typing import Any

import pytest

import prism_om.core.projection as projection
from bench.data import SESSION_ID, build_dataset, capped_entries
from prism_om.core.records import FoldedMemory
from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.stores.base import SessionStore
from prism_om.tokens import HEURISTIC_ENCODING, LineMemo, TokenEstimator, get_estimator

DEFAULT = get_estimator()
needs_tiktoken = pytest.mark.skipif(
    DEFAULT.name == HEURISTIC_ENCODING, reason="no tiktoken encoding loadable"
)


@needs_tiktoken
async def test_a_second_turn_encodes_only_what_changed(store: SessionStore) -> None:
    entries = capped_entries(build_dataset(1500), target_tokens=400)
    await store.append_many(entries)
    encoded: list[str] = []

    def encode(text: str) -> Any:
        encoded.append(text)
        return DEFAULT._encode(text)

    est = TokenEstimator(DEFAULT.name, encode, LineMemo())

    async def blocks() -> list[tuple[str, int]]:
        made = await build_observational_memory_context_blocks(
            store, session_id=SESSION_ID, estimator=est
        )
        return [(b.name, b.tokens) for b in made]

    first = await blocks()
    assert [name for name, _ in first] == ["observational-memory", "recent-messages"]
    # The counts are the whole texts' counts, as before.
    plain = await build_observational_memory_context_blocks(store, session_id=SESSION_ID)
    assert first == [(b.name, DEFAULT.count(b.text)) for b in plain]
    assert encoded
    encoded.clear()
    # The next turn renders the same blocks: nothing is encoded again (the whole text of
    # both blocks was, before).
    assert await blocks() == first
    assert encoded == []


async def test_a_turn_builds_no_folded_memory(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The blocks need the visible memory only: the projection's FoldedMemory (a pydantic
    validation of the whole active pool) was built, and dropped, on every call."""
    data = build_dataset(800)
    await store.append_many(capped_entries(data, target_tokens=400))
    built: list[int] = []
    real = projection.FoldedMemory

    def counting(**fields: Any) -> FoldedMemory:
        built.append(1)
        return real(**fields)

    monkeypatch.setattr(projection, "FoldedMemory", counting)
    revoked = [data.memory_ids[-1], data.observed[-2][3]]
    for invalid in ([], revoked):
        blocks = await build_observational_memory_context_blocks(
            store, session_id=SESSION_ID, invalidated_ids=invalid
        )
        assert built == []
        # What the blocks show is the projection's visible memory, as before.
        ledger = await store.ledger(SESSION_ID)
        recent = blocks[-1].entry_ids
        seen = projection.build_observational_memory_projection_from_entries(
            ledger, invalidated_ids=invalid, recent_entry_ids=recent
        )
        visible = projection.visible_memory(ledger, invalid, recent)
        assert visible == (seen.visible_observations, seen.visible_reflections)
        shown = {o.id for o in seen.visible_observations}
        assert set(blocks[0].memory_ids) <= shown | {r.id for r in seen.visible_reflections}
        built.clear()
