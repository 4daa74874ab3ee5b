"""Per-turn reads of an attached session follow the live memory, not the transcript.

A long scripted session (the ``bench.reflection_budget`` script: offline observer and
reflector, the reflection budget, the lowest-relevance dropper) records far more memory
than stays active. What a turn reads back is counted here, never timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.reflection_budget import POOL_MAX_TOKENS, POOL_TARGET_TOKENS, turn_text
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime


async def run_turns(store: SessionStore, turns: int) -> None:
    session = Session(store, "long")
    offline = OfflineMemoryProvider()
    runtime = create_observational_memory_runtime(
        session=session,
        append_entry=session.append,
        session_model="offline",
        observation={"provider": offline},
        reflection={"provider": offline, "budget_tokens": 120},
        settings={
            "observation": {"message_tokens": 200},
            "reflection": {"observation_tokens": 300},
            "dropper": {"policy": "lowest-relevance"},
            "context": {
                "recent_messages": 6,
                "observations_pool_max_tokens": POOL_MAX_TOKENS // 4,
                "observations_pool_target_tokens": POOL_TARGET_TOKENS // 4,
            },
        },
    )
    for turn in range(turns):
        await session.append_message("user", turn_text(turn))
        await session.append_message("assistant", "Noted.")
        await runtime.flush()


async def test_sqlite_live_ledger_returns_only_active_memory_rows(tmp_path: Path) -> None:
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        await run_turns(store, 120)
        full = await store.ledger("long")
        # The session must have left most memory behind for the count to mean anything.
        assert len(full.dropped_observation_ids) > 2 * len(full.observations) // 3
        assert full.supersessions

        memory_rows = [0]
        fetch = store._fetch

        async def counting(sql: str, params: Any = ()) -> list[Any]:
            rows = await fetch(sql, params)
            # Memory rows carry a JSON body (six columns); drop and marker rows do not.
            memory_rows[0] += sum(1 for row in rows if len(row) == 6)
            assert not any(len(row) == 3 for row in rows), "drop rows were read"
            return rows

        store._fetch = counting  # type: ignore[method-assign]
        live = await store.live_ledger("long")
        assert live.observations and live.reflections
        assert memory_rows[0] == len(live.observations) + len(live.reflections)
