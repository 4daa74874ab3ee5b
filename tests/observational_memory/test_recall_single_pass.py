"""Recall from a store resolves an id once and builds its answer once (issue 16).

The store path used to run the whole resolver twice: once to learn which sources to
fetch, once more with them, so the memory's fields were dumped and redacted twice per
call. Counted here through a counting ``Redactor`` (every value of the answer passes
through it exactly once), on every adapter; no clock is read.
"""

from __future__ import annotations

from typing import Any

from prism_om.core.redaction import Redactor, redactor
from prism_om.observational_memory import recall_observational_memory
from prism_om.stores.base import SessionStore
from prism_om.testing.memory_conformance import load_builder

from .test_recall import SECRET, Story


class CountingRedactor(Redactor):
    __slots__ = ("calls",)

    def __init__(self) -> None:
        super().__init__([SECRET])
        self.calls = {"value": 0}

    def value(self, value: Any) -> Any:
        self.calls["value"] += 1
        return super().value(value)


async def recall_counted(store: SessionStore, memory_id: str, **kwargs: Any) -> Any:
    red = CountingRedactor()
    fetches = [0]
    get_many = store.get_many

    async def counted(ids: Any) -> Any:
        fetches[0] += 1
        return await get_many(ids)

    store.get_many = counted  # type: ignore[method-assign]
    try:
        out = await recall_observational_memory(
            store, memory_id, session_id="s1", secrets=red, **kwargs
        )
    finally:
        del store.get_many
    return out, red.calls, fetches[0]


async def test_observation_built_once(store: SessionStore) -> None:
    story = Story()
    await load_builder(store, story.builder)
    out, calls, fetches = await recall_counted(store, story.o1)
    assert out.found and len(out.sources) == 2
    assert SECRET not in str(out.to_json())
    # Its fields once and each of its two sources once.
    assert calls == {"value": 3}
    # The sources come with the memory rows (``memory_with_sources``): a SQL store reads
    # them in the same statement (no lookup by id), the others by one get_many at most.
    assert fetches <= 1


async def test_reflection_built_once(store: SessionStore) -> None:
    story = Story()
    await load_builder(store, story.builder)
    out, calls, fetches = await recall_counted(store, story.r1)
    assert out.found and len(out.supporting_observations) == 2
    sources = len(out.sources)
    # Its fields, each support and each source once.
    assert calls == {"value": 1 + 2 + sources}
    assert fetches == 1


async def test_withheld_or_unknown_fetch_no_source(store: SessionStore) -> None:
    story = Story()
    await load_builder(store, story.builder)
    for memory_id, invalid in (
        (story.o1, {story.m1.id}),
        (story.r1, {story.o1}),
        ("0" * 12, set()),
    ):
        out, calls, fetches = await recall_counted(store, memory_id, invalidated_ids=invalid)
        assert not out.found
        assert calls == {"value": 0}
        assert fetches == 0


def test_no_secrets_reuses_one_redactor() -> None:
    # Built per recall and per page before: a pattern-less Redactor each call.
    assert redactor(None) is redactor(None)
    assert not redactor(None)
    assert redactor(None).text(SECRET) == SECRET
