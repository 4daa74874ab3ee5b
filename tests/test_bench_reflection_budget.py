"""``bench.reflection_budget`` measures the active reflections of the rendered memory."""

from __future__ import annotations

from bench.reflection_budget import _reflection_tokens
from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.stores import open_store
from prism_om.tokens import get_estimator
from tests.stores.test_turn_cost import run_turns


async def test_reflection_lines_of_the_current_render_are_counted() -> None:
    async with await open_store("memory:") as store:
        await run_turns(store, 40)
        live = await store.live_ledger("long")
        assert live.reflections
        blocks = await build_observational_memory_context_blocks(
            store, session_id="long", keep_recent_entries=6
        )
        text = next(b.text for b in blocks if b.name == "observational-memory")
        estimator = get_estimator()
        expected = sum(estimator.count(r.reflection.text) for r in live.reflections)
        assert expected > 0
        assert _reflection_tokens(text, estimator) == expected
