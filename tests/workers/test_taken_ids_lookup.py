"""The workers check the memory ids they mint by id, not by reading the whole ledger.

A new observation or reflection id must differ from every id of the branch, dropped and
superseded ones included. The runtime mints against the live ledger it reads anyway and
asks the store which minted ids are taken (``taken_memory_ids``, a lookup by id), so a
flush never folds everything ever recorded. Work is counted here, never timed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from prism_om.core.ledger import fold_ledger
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime
from prism_om.workers import runtime as runtime_module
from tests.stores.test_turn_cost import run_turns


async def test_flushes_never_read_the_full_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with await SqliteStore.open(tmp_path / "s.db") as store:
        full_reads = [0]
        ledger = store.ledger

        async def counting(*args: Any, **kwargs: Any) -> Any:
            full_reads[0] += 1
            return await ledger(*args, **kwargs)

        lookups = [0]
        taken = store.taken_memory_ids

        async def counting_taken(*args: Any, **kwargs: Any) -> set[str]:
            lookups[0] += 1
            return await taken(*args, **kwargs)

        monkeypatch.setattr(store, "ledger", counting)
        monkeypatch.setattr(store, "taken_memory_ids", counting_taken)
        await run_turns(store, 60)
        monkeypatch.undo()
        assert lookups[0] > 0, "the workers never minted an id"
        assert full_reads[0] == 0
        # The ids stayed unique on the branch.
        folded = fold_ledger(await store.entries("long"))
        ids = [r.id for r in folded.observations] + [r.id for r in folded.reflections]
        assert len(ids) == len(set(ids))


async def test_a_minted_id_of_a_dropped_observation_is_replaced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: SessionStore = await SqliteStore.open(tmp_path / "s.db")
    try:
        await run_turns(store, 80)
        folded = fold_ledger(await store.entries("long"))
        dropped = list(folded.dropped_observation_ids)
        superseded = [s.reflection_id for s in folded.supersessions]
        assert len(dropped) > 1 and superseded
        live = {r.id for r in folded.observations if r.id not in set(dropped)}
        session = Session(store, "long")
        offline = OfflineMemoryProvider()
        runtime = create_observational_memory_runtime(
            session=session,
            append_entry=session.append,
            session_model="offline",
            observation={"provider": offline},
        )
        fresh = iter(["a00000000001", dropped[1], "a00000000002"])
        monkeypatch.setattr(runtime_module, "create_memory_id", lambda: next(fresh))
        minted = [dropped[0], "b00000000001", superseded[0]]
        taken = set(live)
        renamed = await runtime._claimed(minted, taken)
        # The dropped and the superseded id get new ones; a new id that is itself
        # taken (dropped[1]) is minted again.
        assert renamed == {dropped[0]: "a00000000001", superseded[0]: "a00000000002"} or (
            renamed == {dropped[0]: "a00000000002", superseded[0]: "a00000000001"}
        )
        assert {"a00000000001", "a00000000002", *minted} <= taken
        assert await runtime._claimed(["b00000000002"], taken) == {}
    finally:
        await store.close()
