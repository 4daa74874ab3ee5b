"""Per-turn reads of an attached session follow the live memory, not the transcript.

A long scripted session (the ``bench.reflection_budget`` script: offline observer and
reflector, the reflection budget, the lowest-relevance dropper) records far more memory
than stays active. What a turn reads back is counted here, never timed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from support.sql_work import statements

from bench.reflection_budget import POOL_MAX_TOKENS, POOL_TARGET_TOKENS, turn_text
from prism_om.core.branch_reads import entries_after_cursor
from prism_om.core.ledger import fold_ledger
from prism_om.core.ledger_views import live_ledger
from prism_om.core.scope_map import fold_work_scope_map
from prism_om.entries import SessionEntry
from prism_om.errors import EntryNotFoundError
from prism_om.observational_memory import build_observational_memory_context_blocks
from prism_om.session import Session
from prism_om.stores import SessionStore
from prism_om.stores.sqlite import SqliteStore
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import OPERATIONS, random_builder
from prism_om.workers import OfflineMemoryProvider, create_observational_memory_runtime


async def run_turns(store: SessionStore, turns: int, start: int = 0) -> None:
    """``turns`` attached turns: context build, a user and an assistant message, a flush."""
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
    for turn in range(start, start + turns):
        await build_observational_memory_context_blocks(
            store, session_id="long", keep_recent_entries=6
        )
        await session.append_message("user", turn_text(turn))
        await session.append_message("assistant", "Noted.")
        await runtime.flush()


async def test_sqlite_live_ledger_returns_only_active_memory_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with statements(monkeypatch) as traced:
        store = await SqliteStore.open(tmp_path / "s.db")
    async with store:
        await run_turns(store, 120)
        full = await store.ledger("long")
        # The session must have left most memory behind for the count to mean anything.
        dropped = len(full.dropped_observation_ids)
        assert dropped > 2 * len(full.observations) // 3
        assert full.supersessions
        with traced.counting() as run:
            live = await store.live_ledger("long")
        assert live.observations and live.reflections
        assert live == live_ledger(fold_ledger(await store.entries("long")))
        # Counted at the driver: the live memory's rows and a few more (the leaf's
        # position, markers); the dropped observations' rows, or their drop records,
        # would be as many again as the dropped ids.
        kept = len(live.observations) + len(live.reflections)
        assert kept <= run.rows <= kept + 10, (run.rows, kept, dropped)
        assert dropped > 10


@pytest.fixture(params=["memory", "jsonl"])
async def indexed(
    request: pytest.FixtureRequest, make_opener: Callable[[str], StoreOpener]
) -> AsyncIterator[SessionStore]:
    opened = await make_opener(request.param).open()
    yield opened
    await opened.close()


async def test_memory_and_jsonl_turns_never_read_the_whole_branch(
    indexed: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ledger, scope map and the observer's new entries come from the tree index: a turn
    walks the entries since the last read, never the path from the root."""
    await run_turns(indexed, 40)
    expected = fold_ledger(await indexed.entries("long"))

    async def whole_branch(*args: object, **kwargs: object) -> list[SessionEntry]:
        raise AssertionError("a per-turn read asked for the whole branch")

    monkeypatch.setattr(indexed, "entries", whole_branch)
    monkeypatch.setattr(indexed, "list", whole_branch)
    assert await indexed.ledger("long") == expected
    await run_turns(indexed, 10, start=40)
    monkeypatch.undo()
    assert await indexed.ledger("long") == fold_ledger(await indexed.entries("long"))


SCOPED = (*OPERATIONS, "scope", "scope", "fork")


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_indexed_reads_equal_the_pure_folds_on_every_leaf(
    store: SessionStore, seed: int
) -> None:
    """Ledger, scope map and entries_after on every leaf of a forked session (scope records
    on several branches) equal the pure functions over that leaf's branch."""
    builder = random_builder(seed, steps=120, session_id="forked", operations=SCOPED)
    await load_builder(store, builder)
    sid = builder.session_id
    leaves = await store.leaves(sid)
    assert len(leaves) > 1
    everything = await store.list(sid)
    for leaf in leaves:
        branch = await store.entries(sid, leaf)
        assert await store.ledger(sid, leaf) == fold_ledger(branch)
        assert await store.scope_map(sid, leaf) == fold_work_scope_map(branch)
        for cursor in (None, branch[0].id, branch[len(branch) // 2].id, branch[-1].id):
            after = await store.entries_after(sid, cursor, leaf)
            assert after == entries_after_cursor(branch, cursor)
        on_branch = {e.id for e in branch}
        off = next(e.id for e in everything if e.id not in on_branch)
        with pytest.raises(EntryNotFoundError) as raised:
            await store.entries_after(sid, off, leaf)
        assert off in str(raised.value)
        with pytest.raises(EntryNotFoundError):
            await store.entries_after(sid, "no-such-entry", leaf)
    # Asked again (remembered ledgers extended or reused), still the same answers.
    for leaf in reversed(leaves):
        branch = await store.entries(sid, leaf)
        assert await store.ledger(sid, leaf) == fold_ledger(branch)


async def test_memory_and_jsonl_fold_a_new_record_into_the_live_view_alone(
    indexed: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The live view after a new memory record folds that record alone into the live view
    before it (``LedgerBuilder(live=True)``): the records before it, dropped observations
    among them, are not parsed or filtered again."""
    from prism_om.core import ledger, ledger_views

    await run_turns(indexed, 30)
    first = await indexed.live_ledger("long")
    assert first == ledger_views.live_ledger(fold_ledger(await indexed.entries("long")))
    assert await indexed.live_ledger("long") is first  # remembered
    parsed = [0]
    parse = ledger.parse_memory_record

    def counting(entry: Any) -> Any:
        parsed[0] += 1
        return parse(entry)

    monkeypatch.setattr(ledger, "parse_memory_record", counting)
    live = {r.id for r in first.observations}
    gone = sorted(live)[:2]
    await Session(indexed, "long").append_custom(
        {"type": "om.observations.dropped", "observationIds": gone}
    )
    after = await indexed.live_ledger("long")
    assert parsed[0] == 1
    assert {r.id for r in after.observations} == live - set(gone)
    monkeypatch.undo()
    assert after == ledger_views.live_ledger(fold_ledger(await indexed.entries("long")))
