"""Recall returns a bounded slice of sources, with the total and a way on (issue 13, item 16)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from prism_om import RECALL_SOURCES_DEFAULT_LIMIT, RECALL_SOURCES_HARD_CAP
from prism_om.core.records import REFLECTIONS_RECORDED
from prism_om.errors import AmbiguousInputError, InvalidInputError, PageTooLargeError
from prism_om.observational_memory import recall_observational_memory
from prism_om.observational_memory.recall_tool import create_recall_memory_tool
from prism_om.stores.base import SessionStore
from prism_om.testing.conformance import StoreOpener
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder

CITED = 250


class Wide:
    """A session whose observation cites 250 messages, and a reflection over it."""

    def __init__(self) -> None:
        b = self.builder = BranchBuilder(session_id="s1", rng=random.Random(3))
        self.messages = [b.message("user", f"message number {i}").id for i in range(CITED)]
        rec = b.observe(1, sources=self.messages, text="a wide observation")
        assert rec.data is not None
        self.obs = rec.data["observations"][0]["id"]
        small = b.observe(1, sources=[self.messages[0]], text="small")
        assert small.data is not None
        self.small = small.data["observations"][0]["id"]
        self.refl = b.memory_id()
        b.custom(
            {
                "type": REFLECTIONS_RECORDED,
                "reflections": [
                    {"id": self.refl, "text": "both", "observationIds": [self.small, self.obs]}
                ],
            }
        )


@pytest.fixture
def wide() -> Wide:
    return Wide()


class CountingGets:
    """Wraps a store and records the ids each ``get_many`` asked for."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self.asked: list[int] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def get_many(self, ids: Any) -> Any:
        ids = list(ids)
        self.asked.append(len(ids))
        return await self._store.get_many(ids)


@pytest.fixture
async def store(store_opener: StoreOpener, wide: Wide) -> AsyncIterator[SessionStore]:
    opened = await store_opener.open()
    await load_builder(opened, wide.builder, batch=100)
    yield opened
    await opened.close()


def source_ids(result: dict[str, Any]) -> list[str]:
    return [s["id"] for s in result["sources"]]


async def test_store_recall_returns_slices_and_reads_only_the_slice(
    store: SessionStore, wide: Wide
) -> None:
    counting = CountingGets(store)
    seen: list[str] = []
    offset: int | None = 0
    offsets = []
    while offset is not None:
        result = (
            await recall_observational_memory(
                counting,  # type: ignore[arg-type]
                wide.obs,
                session_id="s1",
                sources_offset=offset,
            )
        ).to_json()
        assert result["found"] and result["sourcesTotal"] == CITED
        assert result["sourcesOffset"] == offset
        assert len(result["sources"]) <= RECALL_SOURCES_DEFAULT_LIMIT
        seen += source_ids(result)
        offsets.append(offset)
        offset = result["nextSourcesOffset"]
    assert offsets == [0, 100, 200]
    assert seen == wide.messages  # citation order, each once, nothing lost
    assert counting.asked == [100, 100, 50]  # the store read only each slice's entries
    # The list path pages identically.
    for offset in (0, 100, 200, 250, 1000):
        listed = recall_observational_memory(
            wide.builder.path, wide.obs, sources_offset=offset
        ).to_json()
        stored = (
            await recall_observational_memory(
                store, wide.obs, session_id="s1", sources_offset=offset
            )
        ).to_json()
        assert listed == stored
    past_end = recall_observational_memory(wide.builder.path, wide.obs, sources_offset=250)
    assert past_end.sources == () and past_end.next_sources_offset is None


async def test_reflection_sources_are_paged_over_the_union(store: SessionStore, wide: Wide) -> None:
    first = (await recall_observational_memory(store, wide.refl, session_id="s1")).to_json()
    assert first["sourcesTotal"] == CITED  # the small observation's source is cited twice
    assert source_ids(first) == wide.messages[:100]
    assert first["nextSourcesOffset"] == 100
    assert len(first["supportingObservations"]) == 2
    limited = recall_observational_memory(
        wide.builder.path, wide.refl, sources_offset=240, sources_limit=5
    ).to_json()
    assert source_ids(limited) == wide.messages[240:245]
    assert limited["nextSourcesOffset"] == 245


def test_small_recall_reports_its_total(wide: Wide) -> None:
    result = recall_observational_memory(wide.builder.path, wide.small).to_json()
    assert result["sourcesTotal"] == 1 and result["nextSourcesOffset"] is None
    assert result["sourcesOffset"] == 0 and len(result["sources"]) == 1


@pytest.mark.parametrize(
    ("offset", "limit", "error"),
    [
        (-1, None, InvalidInputError),
        ("5", None, InvalidInputError),
        (True, None, InvalidInputError),
        (0, 0, InvalidInputError),
        (0, RECALL_SOURCES_HARD_CAP + 1, PageTooLargeError),
    ],
)
def test_bad_source_windows_are_refused(
    wide: Wide, offset: Any, limit: Any, error: type[Exception]
) -> None:
    with pytest.raises(error):
        recall_observational_memory(
            wide.builder.path, wide.obs, sources_offset=offset, sources_limit=limit
        )


async def test_the_tool_pages_sources(store: SessionStore, wide: Wide) -> None:
    tool = create_recall_memory_tool(store=store)
    props = tool.definition.parameters["properties"]
    assert props["sourcesOffset"] == {
        "type": "integer",
        "minimum": 0,
        "description": props["sourcesOffset"]["description"],
    }
    assert "sourcesOffset" in tool.definition.description
    first = await tool.handler({"id": wide.obs}, session_id="s1")
    assert len(first["sources"]) == RECALL_SOURCES_DEFAULT_LIMIT
    assert first["sourcesTotal"] == CITED and first["nextSourcesOffset"] == 100
    last = await tool.handler({"id": wide.obs, "sourcesOffset": 200}, session_id="s1")
    assert source_ids(last) == wide.messages[200:] and last["nextSourcesOffset"] is None
    json.dumps(last)
    callback = create_recall_memory_tool(get_entries=lambda sid: list(wide.builder.path))
    assert await callback.handler({"id": wide.obs, "sourcesOffset": 200}, session_id="s1") == last
    with pytest.raises(InvalidInputError, match="sourcesOffset"):
        await tool.handler({"id": wide.obs, "sourcesOffset": -3}, session_id="s1")
    with pytest.raises(AmbiguousInputError, match="sourcesOffset"):
        await tool.handler({"cursor": wide.messages[0], "sourcesOffset": 3}, session_id="s1")
