"""PostgreSQL: the sources a recall's ``memory_subset`` reads ahead serve that recall only.

They used to stay on the store until the next ``memory_subset``: a ``get`` of such an id
after the session was deleted (here, or by another process) still returned the entry.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prism_om.observational_memory import recall_observational_memory
from prism_om.testing.memory_conformance import load_builder

from ..observational_memory.test_recall import Story


async def test_a_deleted_source_is_not_served_from_an_earlier_recall(
    make_opener: Any, tmp_path: Path
) -> None:
    story = Story()
    store = await make_opener("postgres").open()
    other = await make_opener("postgres").open()  # another host, on the same schema
    try:
        await load_builder(store, story.builder)
        # A given leaf: memory_subset reads the sources ahead, get_many serves them.
        got = await recall_observational_memory(
            store, story.o1, session_id="s1", leaf_id=story.m5.id
        )
        assert [s["id"] for s in got.sources] == [story.m1.id, story.m2.id]
        assert await other.delete_session("s1") > 0
        assert await store.get(story.m1.id) is None
        assert await store.get_many([story.m1.id, story.m2.id]) == {}
    finally:
        await other.close()
        await store.close()
