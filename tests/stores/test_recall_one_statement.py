"""Recall by id on SQLite and PostgreSQL: one statement, and no model built to be dumped.

The memory's rows and the sources they cite come from one statement (SQLite used to run
two: the rows, then the sources by id), and the answer's dicts are serialised straight
from the parsed rows: no ``SessionEntry.to_wire()`` or ``Observation.model_dump()``
(their Python wrap step ran once per model), no ``get_many``. Counted, not timed; the
answers are the list path's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from prism_om.core.records import Observation
from prism_om.entries import SessionEntry
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.base import SessionStore
from prism_om.stores.sql.recall_rows import recall_statement
from prism_om.testing.memory_conformance import load_builder

from ..observational_memory.test_recall import SECRET, Story
from .test_sqlite_one_hop import hops


async def opened(kind: str, make_opener: Any, tmp_path: Path) -> SessionStore:
    (tmp_path / kind).mkdir(exist_ok=True)
    store: SessionStore = await make_opener(kind).open()
    return store


class Counts:
    """Calls of the methods that build a wire dict the slow way, and of ``get_many``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, store: SessionStore) -> None:
        self.calls = {"to_wire": 0, "model_dump": 0, "get_many": 0}
        for owner, name in ((SessionEntry, "to_wire"), (Observation, "model_dump")):
            monkeypatch.setattr(owner, name, self._counted(name, getattr(owner, name)))
        get_many = store.get_many

        async def counted_get_many(ids: Any) -> Any:
            self.calls["get_many"] += 1
            return await get_many(ids)

        monkeypatch.setattr(store, "get_many", counted_get_many)

    def _counted(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return method(*args, **kwargs)

        return counted


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_recall_builds_its_answer_from_the_rows(
    kind: str, make_opener: Any, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    story = Story()
    store = await opened(kind, make_opener, tmp_path)
    try:
        await load_builder(store, story.builder)
        counts = Counts(monkeypatch, store)
        for memory_id in (story.o1, story.o3, story.foreign, "0" * 12):
            for secrets in (None, [SECRET]):
                got = await recall_observational_memory(
                    store, memory_id, session_id="s1", secrets=secrets
                )
                monkeypatch.undo()
                assert got == recall_observational_memory(story.path, memory_id, secrets=secrets)
                counts = Counts(monkeypatch, store)
        assert counts.calls == {"to_wire": 0, "model_dump": 0, "get_many": 0}
        # Every recall above, counted on its own.
        for memory_id in (story.o1, story.o3):
            counts = Counts(monkeypatch, store)
            got = await recall_observational_memory(store, memory_id, session_id="s1")
            assert got.found and got.sources
            assert counts.calls == {"to_wire": 0, "model_dump": 0, "get_many": 0}
            monkeypatch.undo()
    finally:
        await store.close()


async def test_sqlite_recall_is_one_statement_on_the_loop(make_opener: Any, tmp_path: Path) -> None:
    story = Story()
    store: Any = await opened("sqlite", make_opener, tmp_path)
    try:
        await load_builder(store, story.builder)
        await recall_observational_memory(store, story.o1, session_id="s1")  # opens it
        statements: list[str] = []
        store._point.raw.set_trace_callback(statements.append)
        for memory_id, sources in ((story.o1, 2), (story.o3, 1), ("0" * 12, 0)):
            statements.clear()
            got: list[Any] = []

            async def call(memory_id: str = memory_id, got: list[Any] = got) -> None:
                got.append(await recall_observational_memory(store, memory_id, session_id="s1"))

            assert await hops(call) == 0
            assert len(statements) == 1, statements
            assert len(got[0].sources) == sources
            assert got[0] == recall_observational_memory(story.path, memory_id)
    finally:
        await store.close()


async def test_sqlite_recall_statement_is_index_searches(make_opener: Any, tmp_path: Path) -> None:
    # Each table is searched by index; only the branch pieces and the source ids read
    # ahead (a few rows each) are scanned, and SQLite builds no automatic index per call.
    story = Story()
    store: Any = await opened("sqlite", make_opener, tmp_path)
    try:
        await load_builder(store, story.builder)
        await recall_observational_memory(store, story.o1, session_id="s1")
        sql, params = recall_statement("s1", story.o1)
        plan = [row[3] for row in store._point.raw.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        assert not [step for step in plan if "AUTOMATIC" in step], plan
        scans = {step for step in plan if step.startswith("SCAN")}
        assert scans <= {"SCAN bp", "SCAN w"}, plan
    finally:
        await store.close()
