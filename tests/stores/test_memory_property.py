"""Property: on generated sessions, every adapter's ledger() and scope_map() equal the fold.

Hypothesis draws sessions with forks, observations, reflections, consolidating
reflections that supersede earlier ones, drops, tombstone drops, compactions and scope
records; each example is loaded into a fresh store of each adapter
and compared, leaf by leaf, with the pure reference functions.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from support.postgres import with_fresh_schema

from prism_om import fold_work_scope_map
from prism_om.core.ledger_views import live_ledger
from prism_om.observational_memory import fold_observational_memory_ledger
from prism_om.stores import open_store
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import (
    SUPERSESSION_OPERATIONS,
    BranchBuilder,
    branch_builders,
)


async def _check(kind: str, builder: BranchBuilder, folder: Path, postgres_base: str) -> None:
    if kind == "postgres":
        # A fresh schema per example, as a fresh folder is for the file adapters.
        url = with_fresh_schema(postgres_base)
    else:
        url = {"memory": "memory:", "jsonl": f"jsonl:{folder}", "sqlite": f"sqlite:{folder}.db"}[
            kind
        ]
    async with await open_store(url) as store:
        await load_builder(store, builder, batch=3)
        sid = builder.session_id
        for leaf in await store.leaves(sid):
            branch = await store.entries(sid, leaf)
            ledger = fold_observational_memory_ledger(branch)
            assert await store.ledger(sid, leaf) == ledger
            assert await store.live_ledger(sid, leaf) == live_ledger(ledger)
            # The builder's own bookkeeping of what is superseded, not the code under test.
            if leaf == builder.path[-1].id:
                expected = [r.id for r in builder.model.active_reflections]
                assert [r.id for r in live_ledger(ledger).reflections] == expected
            assert await store.scope_map(sid, leaf) == fold_work_scope_map(branch)


@pytest.mark.parametrize("kind", ["memory", "jsonl", "sqlite", "postgres"])
def test_store_ledgers_equal_the_fold(kind: str, request: pytest.FixtureRequest) -> None:
    base = request.getfixturevalue("postgres_base_url") if kind == "postgres" else ""
    runner = asyncio.Runner()
    root = Path(tempfile.mkdtemp(prefix="prism-prop-"))
    counter = iter(range(10_000))

    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(builder=branch_builders(min_steps=1, max_steps=60, operations=SUPERSESSION_OPERATIONS))
    def check(builder: BranchBuilder) -> None:
        runner.run(_check(kind, builder, root / f"s{next(counter)}", base))

    try:
        check()
    finally:
        runner.close()
        shutil.rmtree(root, ignore_errors=True)
