"""The client-side work of a warm PostgreSQL read, counted (never timed).

Whether a statement returned rows is read off the result's status: psycopg's
``cursor.description`` answers the same but builds a ``Column`` object per result column
on every call (nine for a recall, eleven for a page), which was ~10 µs of a read.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from prism_om.observational_memory import (
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.stores.postgres import PostgresStore
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import random_builder


async def test_warm_reads_build_no_result_description(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    builder = random_builder(11, 80, forks=False)
    async with await PostgresStore.open(postgres_url) as store:
        await load_builder(store, builder)
        session = builder.path[0].session_id
        memory_id = next(
            o["id"]
            for e in builder.path
            if e.data is not None and e.data.get("type") == "om.observations.recorded"
            for o in e.data["observations"]
        )
        message = next(e.id for e in builder.path if e.kind == "message")

        async def reads() -> None:
            recalled = await recall_observational_memory(store, memory_id, session_id=session)
            assert recalled.found
            page = await recall_observational_memory_branch_page(
                store, message, session_id=session, limit=5
            )
            assert page.messages
            assert await store.leaf(session) == builder.path[-1].id
            assert await store.recent_messages(session, 5)

        await reads()
        built = 0
        description = psycopg.AsyncCursor.description

        def counted(cursor: Any) -> Any:
            nonlocal built
            built += 1
            return description.__get__(cursor)

        monkeypatch.setattr(psycopg.AsyncCursor, "description", property(counted))
        for _ in range(3):
            await reads()
        assert built == 0
