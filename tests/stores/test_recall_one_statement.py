"""Recall by id on SQLite and PostgreSQL builds no model to be dumped.

The answer's dicts are serialised straight from the parsed rows: no
``SessionEntry.to_wire()`` or ``Observation.model_dump()`` (their Python wrap step ran once
per model), no ``get_many``. Counted, not timed; the answers are the list path's. That a
recall is one statement: tests/stores/test_sqlite_statements_per_read.py (SQLite) and
test_postgres_round_trips.py (PostgreSQL).
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
from prism_om.testing.memory_conformance import load_builder

from ..observational_memory.test_recall import SECRET, Story


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
