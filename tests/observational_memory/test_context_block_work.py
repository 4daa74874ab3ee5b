"""Work done per turn by the store's context blocks (issue 16, the capped-pool workload).

Counted, never timed: the tokens encoded for the blocks' counts, on every adapter.
"""

from __future__ import annotations

from typing import Any

import pytest

from bench.data import SESSION_ID, build_dataset, capped_entries
from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.stores.base import SessionStore
from prism_om.tokens import HEURISTIC_ENCODING, TokenEstimator, get_estimator

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

    est = TokenEstimator(DEFAULT.name, encode, {})

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
