"""The ``recall`` tool over a host callback and over every store adapter."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism_om.entries import SessionEntry
from prism_om.errors import (
    AmbiguousInputError,
    EntryNotFoundError,
    InvalidIdError,
    InvalidInputError,
    PageTooLargeError,
    PrismMemoryError,
    SessionMismatchError,
)
from prism_om.observational_memory import (
    fold_observational_memory_ledger,
    recall_observational_memory,
    recall_observational_memory_branch_page,
)
from prism_om.observational_memory.recall_tool import RecallMemoryTool, create_recall_memory_tool
from prism_om.stores.base import SessionStore
from prism_om.testing.conformance import StoreOpener, snapshot
from prism_om.testing.memory_conformance import load_builder
from prism_om.testing.om_factories import BranchBuilder, random_builder

SECRET = "sk-tool-secret-42"


class Recording:
    """Wraps a store and records which of its methods were called."""

    def __init__(self, store: SessionStore) -> None:
        self._store = store
        self.calls: list[str] = []

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._store, name)
        if callable(attr):

            def wrapped(*args: Any, **kwargs: Any) -> Any:
                self.calls.append(name)
                return attr(*args, **kwargs)

            return wrapped
        return attr


@pytest.fixture
def builder() -> BranchBuilder:
    return random_builder(9, 60, secrets=[SECRET])


@pytest.fixture
async def store(store_opener: StoreOpener, builder: BranchBuilder) -> AsyncIterator[SessionStore]:
    opened = await store_opener.open()
    await load_builder(opened, builder)
    yield opened
    await opened.close()


def callback_for(builder: BranchBuilder, calls: list[str]) -> Callable[[str], list[SessionEntry]]:
    def get_entries(session_id: str) -> list[SessionEntry]:
        calls.append(session_id)
        return list(builder.path)

    return get_entries


def memory_ids(builder: BranchBuilder) -> list[str]:
    ledger = fold_observational_memory_ledger(builder.path)
    return [r.id for r in ledger.observations] + [r.id for r in ledger.reflections]


def test_definition_schema() -> None:
    tool = create_recall_memory_tool(get_entries=lambda sid: [])
    definition = tool.definition
    assert definition.name == "recall" == tool.name
    assert "topic" in definition.description
    params = definition.parameters
    assert params["additionalProperties"] is False
    assert params["properties"]["id"]["pattern"] == "^[a-f0-9]{12}$"
    assert params["properties"]["limit"]["maximum"] == 100
    assert params["properties"]["direction"]["enum"] == ["forward", "backward"]
    assert params["properties"]["detail"]["enum"] == ["summary", "full"]
    json.dumps(params)


def test_factory_needs_exactly_one_source() -> None:
    with pytest.raises(AmbiguousInputError):
        create_recall_memory_tool()
    with pytest.raises(PageTooLargeError):
        create_recall_memory_tool(get_entries=lambda sid: [], page_limit=101)


async def test_results_match_recall_and_page(store: SessionStore, builder: BranchBuilder) -> None:
    async def async_entries(session_id: str) -> list[SessionEntry]:
        return list(builder.path)

    tools = [
        create_recall_memory_tool(store=store, secrets=[SECRET]),
        create_recall_memory_tool(get_entries=async_entries, secrets=[SECRET]),
        create_recall_memory_tool(get_entries=callback_for(builder, []), secrets=[SECRET]),
    ]
    ids = memory_ids(builder)
    assert ids, "the seed must produce memory"
    messages = [e.id for e in builder.path if e.kind == "message"]
    for tool in tools:
        for memory_id in [*ids, "0123456789ab"]:
            out = await tool.handler({"id": memory_id}, session_id="s1")
            expected = recall_observational_memory(builder.path, memory_id, secrets=[SECRET])
            assert out == expected.to_json()
            assert SECRET not in json.dumps(out)
        out = await tool.handler(
            {"cursor": messages[0], "limit": 5, "detail": "full"}, session_id="s1"
        )
        page = recall_observational_memory_branch_page(
            builder.path, messages[0], limit=5, detail="full", secrets=[SECRET]
        )
        assert out == page.to_json()
        # Default page size, and nulls count as absent.
        out = await tool.handler(
            {"cursor": messages[0], "id": None, "limit": None}, session_id="s1"
        )
        assert out["limit"] == 20


def _nested(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


INVALID_ARGS: list[Any] = [
    ({}, AmbiguousInputError),
    ({"id": "aaaaaaaaaaaa", "cursor": "x"}, AmbiguousInputError),
    ({"id": "aaaaaaaaaaaa", "limit": 3}, AmbiguousInputError),
    ({"id": "AAAAAAAAAAAA"}, InvalidIdError),
    ({"id": 123}, InvalidIdError),
    ({"id": "aaaaaaaaaaaa", "query": "billing"}, InvalidInputError),
    ({"cursor": ""}, InvalidIdError),
    ({"cursor": 5}, InvalidIdError),
    ({"cursor": "s1.00001", "limit": 101}, PageTooLargeError),
    ({"cursor": "s1.00001", "limit": 0}, InvalidInputError),
    ({"cursor": "s1.00001", "limit": 2.0}, InvalidInputError),
    ({"cursor": "s1.00001", "direction": "sideways"}, InvalidInputError),
    ({"cursor": "s1.00001", "detail": "everything"}, InvalidInputError),
    (["id"], InvalidInputError),
    # An id no entry can have, whatever the store: refused before any lookup.
    ({"cursor": "s1.0\x00001"}, InvalidIdError),
    ({"cursor": "s1.0\ud800"}, InvalidIdError),
    # Named by their type or size, never by a repr that recurses or raises.
    ({"cursor": "s1.00001", "direction": _nested(100_000)}, InvalidInputError),
    ({"cursor": "s1.00001", "detail": _nested(100_000)}, InvalidInputError),
    ({"id": "aaaaaaaaaaaa", "sourcesOffset": _nested(100_000)}, InvalidInputError),
    pytest.param({"cursor": "s1.00001", "limit": 10**5000}, PageTooLargeError, id="huge-limit"),
    pytest.param(
        {"id": "aaaaaaaaaaaa", "sourcesOffset": -(10**5000)}, InvalidInputError, id="huge"
    ),
]


@pytest.mark.parametrize(("args", "error"), INVALID_ARGS)
async def test_invalid_requests_fail_before_any_lookup(
    store: SessionStore, builder: BranchBuilder, args: Any, error: type[Exception]
) -> None:
    recording = Recording(store)
    calls: list[str] = []
    for tool in (
        create_recall_memory_tool(store=recording),
        create_recall_memory_tool(get_entries=callback_for(builder, calls)),
    ):
        with pytest.raises(error):
            await tool.handler(args, session_id="s1")
    assert recording.calls == [] and calls == []


@pytest.mark.parametrize("session_id", ["", "../etc", "a/b"])
async def test_malformed_session_id(store: SessionStore, session_id: str) -> None:
    tool = create_recall_memory_tool(store=store)
    with pytest.raises(InvalidInputError):
        await tool.handler({"id": "aaaaaaaaaaaa"}, session_id=session_id)


async def test_wrong_session_fails_closed(store: SessionStore, builder: BranchBuilder) -> None:
    by_callback = create_recall_memory_tool(get_entries=lambda sid: list(builder.path))
    by_store = create_recall_memory_tool(store=store)
    cursor = next(e.id for e in builder.path if e.kind == "message")
    for tool in (by_callback, by_store):
        for args in ({"id": memory_ids(builder)[0]}, {"cursor": cursor}):
            with pytest.raises(SessionMismatchError):
                await tool.handler(args, session_id="s2")


async def test_cursor_failures(store: SessionStore, builder: BranchBuilder) -> None:
    custom = next(e for e in builder.path if e.kind == "custom")
    for tool in (
        create_recall_memory_tool(store=store),
        create_recall_memory_tool(get_entries=lambda sid: list(builder.path)),
    ):
        with pytest.raises(EntryNotFoundError):
            await tool.handler({"cursor": "missing"}, session_id="s1")
        with pytest.raises(InvalidInputError):
            await tool.handler({"cursor": custom.id}, session_id="s1")


async def test_revoked_and_shared(store: SessionStore, builder: BranchBuilder) -> None:
    other = random_builder(5, 40, session_id="s2", forks=False)
    shared = fold_observational_memory_ledger(other.path)
    assert shared.observations
    foreign = shared.observations[0].id
    plain = create_recall_memory_tool(store=store)
    assert (await plain.handler({"id": foreign}, session_id="s1"))["reason"] == "unknown"

    async def shared_ledgers(session_id: str) -> list[Any]:
        return [shared]

    tool = create_recall_memory_tool(store=store, shared=shared_ledgers)
    out = await tool.handler({"id": foreign}, session_id="s1")
    assert out["found"] is True


# -- fuzz ----------------------------------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=12,
)
SEED_IDS = memory_ids(random_builder(9, 60))
KEYS = st.sampled_from(["id", "cursor", "limit", "direction", "detail", "other"])
ARGS = (
    st.dictionaries(KEYS, JSON, max_size=4)
    | st.dictionaries(KEYS, st.text(max_size=300), max_size=3)
    | st.builds(lambda s: {"id": s}, st.text(alphabet="abcdef0123456789A", max_size=14))
    | st.builds(
        lambda s: {"cursor": s},
        st.text(max_size=20) | st.sampled_from(["s1.00001", "s1.00002", "s1.00003"]),
    )
    | st.builds(lambda s: {"id": s}, st.sampled_from(SEED_IDS))
    | JSON
)


async def check_fuzz(tool: RecallMemoryTool, args: Any, session_id: str) -> None:
    try:
        out = await tool.handler(args, session_id=session_id)
    except PrismMemoryError:
        return
    json.dumps(out)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(args=ARGS, session_id=st.sampled_from(["s1", "s2", "bad/id"]) | st.text(max_size=6))
async def test_fuzz_handler_answers_or_raises_typed(
    store: SessionStore, builder: BranchBuilder, args: Any, session_id: str
) -> None:
    before = await snapshot(store)
    for tool in (
        create_recall_memory_tool(store=store, secrets=[SECRET]),
        create_recall_memory_tool(get_entries=lambda sid: list(builder.path)),
    ):
        await check_fuzz(tool, args, session_id)
    assert await snapshot(store) == before
