"""Issue 18 item 2's compression target at the default settings, on the frozen LoCoMo data:
rendered memory at most 0.5x the transcript's tokens with at least 85% of the answers'
key words in it; and every id the memory shows, and every reflection it leaves out as a
restatement, still recalls its sources, on every adapter."""

from __future__ import annotations

import re
from pathlib import Path

from prism_om.core.projection import active_memory
from prism_om.eval import run_eval
from prism_om.eval.formats import load_eval_file
from prism_om.eval.run import evaluate_conversation
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.base import SessionStore

LOCOMO = Path(__file__).parents[1] / "data" / "eval" / "locomo_synthetic.json"
_ID = re.compile(r"^- \[([0-9a-f]{12})\] ", re.M)


async def test_default_settings_meet_the_compression_target() -> None:
    # Before the render left out restating reflections: 0.63x (4050/6430), 93.7%.
    # Forced after each session, so every message is observed (the figures' own setting).
    overall = (await run_eval(LOCOMO, observe="per-session", force=True))["overall"]
    assert overall["droppedObservations"] == 0  # no dropper at the defaults
    assert overall["memoryRatio"] <= 0.5
    assert overall["keywordsInMemory"]["rate"] >= 0.85
    assert overall["evidenceCoverage"]["rate"] == 1.0


async def test_shown_ids_and_left_out_reflections_recall_their_sources(
    store: SessionStore,
) -> None:
    conversation = load_eval_file(LOCOMO)[0]
    result = await evaluate_conversation(conversation, store, observe="per-session", force=True)
    shown = _ID.findall(result.memory_text)
    observations, reflections = active_memory(await store.ledger(result.session_id))
    assert set(shown) == {o.id for o in observations}  # restating reflections left out
    assert reflections
    for memory_id in shown + [r.id for r in reflections]:
        recalled = await recall_observational_memory(store, memory_id, session_id=result.session_id)
        assert recalled.found, memory_id
        if recalled.kind == "reflection":
            assert recalled.supporting_observations
            assert not recalled.dropped_supporting_observation_ids
        assert recalled.sources, memory_id
