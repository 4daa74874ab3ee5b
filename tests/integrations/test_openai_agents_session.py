"""``PrismSession`` against the SDK's own ``SQLiteSession``, on every adapter.

The differential test runs random sequences of ``add_items`` / ``get_items(limit)`` /
``pop_item`` / ``clear_session`` on both and requires identical results, then reopens the
store and reads the session again through a new ``PrismSession``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from agents.memory import Session, SessionSettings, SQLiteSession
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from prism_om.errors import InvalidInputError, InvalidSessionIdError, StoreClosedError
from prism_om.integrations.openai_agents import ITEM_TYPE, ROOT_TYPE, PrismSession
from prism_om.stores import open_store
from prism_om.testing.conformance import StoreOpener

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
CALL_IDS = st.sampled_from(["call_1", "call_2", "call_3", ""])
JSON_LEAF = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | TEXT
JSON_VALUE = st.recursive(
    JSON_LEAF | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
    max_leaves=6,
)

ITEMS = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, TEXT),
    st.builds(
        lambda t, url: {
            "role": "user",
            "content": [
                {"type": "input_text", "text": t},
                {"type": "input_image", "image_url": url, "detail": "auto"},
            ],
        },
        TEXT,
        st.sampled_from(["https://example.com/a.png", "data:image/png;base64,iVBORw0K"]),
    ),
    st.builds(
        lambda i, t: {
            "id": f"msg_{i}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": t, "annotations": []}],
        },
        st.integers(0, 99),
        TEXT,
    ),
    st.builds(
        lambda t: {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "refusal", "refusal": t}],
        },
        TEXT,
    ),
    st.builds(
        lambda r, t: {"role": r, "content": t}, st.sampled_from(["system", "developer"]), TEXT
    ),
    st.builds(
        lambda c, n, a: {"type": "function_call", "call_id": c, "name": n, "arguments": a},
        CALL_IDS,
        st.sampled_from(["get_weather", "lookup", ""]),
        st.sampled_from(['{"city": "Oslo"}', "{}", "not json", "[1, 2]", ""]),
    ),
    st.builds(
        lambda c, t: {"type": "function_call_output", "call_id": c, "output": t}, CALL_IDS, TEXT
    ),
    st.builds(
        lambda c, t: {
            "type": "function_call_output",
            "call_id": c,
            "output": [{"type": "input_text", "text": t}],
        },
        CALL_IDS,
        TEXT,
    ),
    st.builds(
        lambda i, t: {
            "type": "reasoning",
            "id": f"rs_{i}",
            "summary": [{"type": "summary_text", "text": t}],
        },
        st.integers(0, 99),
        TEXT,
    ),
    st.builds(
        lambda v: {"type": "web_search_call", "id": "ws_1", "status": "completed", "extra": v},
        JSON_VALUE,
    ),
)
LIMITS = st.none() | st.integers(1, 6)
OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(ITEMS, max_size=4)),
        st.tuples(st.just("get"), LIMITS),
        st.tuples(st.just("pop"), st.none()),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=12,
)

_session_numbers = itertools.count()


async def _apply(session: Any, operation: str, argument: Any) -> Any:
    if operation == "add":
        await session.add_items(argument)
        return None
    if operation == "get":
        return await session.get_items(argument)
    if operation == "pop":
        return await session.pop_item()
    await session.clear_session()
    return None


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_prism_session_matches_sqlite_session(
    store_opener: StoreOpener, operations: list[tuple[str, Any]]
) -> None:
    async def run() -> None:
        sid = f"diff-{next(_session_numbers)}"
        reference = SQLiteSession(sid)
        store = await store_opener.open()
        try:
            prism = PrismSession(sid, store)
            for step, (operation, argument) in enumerate(operations):
                expected = await _apply(reference, operation, argument)
                got = await _apply(prism, operation, argument)
                assert got == expected, (step, operation, argument)
            final = await reference.get_items()
            assert await prism.get_items() == final
            if store_opener.persistent:
                await store.close()
                store = await store_opener.open()
            assert await PrismSession(sid, store).get_items() == final
        finally:
            reference.close()
            await store.close()

    asyncio.run(run())


def test_prism_session_implements_the_sdk_session_protocol() -> None:
    assert isinstance(PrismSession("proto", "memory:"), Session)


async def test_each_item_is_one_entry_and_a_message_item_is_a_message_entry() -> None:
    items: list[Any] = [
        {"role": "user", "content": "Book a table for two."},
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "book", "arguments": '{"n": 2}'},
        {"type": "function_call_output", "call_id": "c1", "output": "booked"},
        {"role": "system", "content": "Be brief."},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "Done.", "annotations": []}],
        },
    ]
    async with PrismSession("kinds", "memory:") as session:
        await session.add_items(items)
        store = session._store
        assert store is not None
        branch = await store.entries("kinds")
        assert await session.get_items() == items
    assert branch[0].custom_type == ROOT_TYPE
    shapes = [(e.kind, e.role or e.custom_type) for e in branch[1:]]
    assert shapes == [
        ("message", "user"),
        ("custom", ITEM_TYPE),  # reasoning: no message meaning
        ("message", "assistant"),
        ("message", "tool"),
        ("custom", ITEM_TYPE),  # a system message: not a user/assistant/tool message
        ("message", "assistant"),
    ]
    assert all(e.custom_type == ITEM_TYPE for e in branch[1:])
    user, call, output, reply = branch[1], branch[3], branch[4], branch[6]
    assert user.message is not None and user.message.content == "Book a table for two."
    assert call.message is not None and call.message.tool_calls is not None
    assert call.message.tool_calls[0].model_dump() == {
        "id": "c1",
        "name": "book",
        "arguments": {"n": 2},
    }
    assert output.message is not None and output.message.tool_call_id == "c1"
    assert output.message.text() == "booked"
    assert reply.message is not None and reply.message.text() == "Done."
    # The item's text is in its message only; the rest of the item is in its data.
    assert user.data == {
        "type": ITEM_TYPE,
        "item": {"role": "user", "content": ""},
        "textInMessage": True,
    }
    assert reply.data is not None and reply.data["item"]["content"][0]["text"] == ""
    # A call's arguments stay in the item as given (the message holds them parsed).
    assert call.data == {"type": ITEM_TYPE, "item": items[2]}
    assert branch[2].data == {"type": ITEM_TYPE, "item": items[1]}


async def test_returned_items_are_copies() -> None:
    async with PrismSession("copies", "memory:") as session:
        item = {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        await session.add_items([item])
        item["content"][0]["text"] = "changed by the caller"
        first = await session.get_items()
        first[0]["content"] = "changed again"
        assert await session.get_items() == [
            {"role": "user", "content": [{"type": "input_text", "text": "hi"}]}
        ]


async def test_pop_and_clear_delete_nothing(store_opener: StoreOpener) -> None:
    store = await store_opener.open()
    try:
        session = PrismSession("keep", store)
        await session.add_items([{"role": "user", "content": "one"}])
        await session.add_items([{"role": "user", "content": "two"}])
        before = {e.id for e in await store.list("keep")}
        assert await session.pop_item() == {"role": "user", "content": "two"}
        assert await session.get_items() == [{"role": "user", "content": "one"}]
        await session.clear_session()
        assert await session.get_items() == []
        assert await session.pop_item() is None
        assert {e.id for e in await store.list("keep")} == before
        root = (await store.entries("keep"))[0]
        assert await store.leaf("keep") == root.id and root.custom_type == ROOT_TYPE
        # The next items start a new branch from the root; the old ones stay on theirs.
        await session.add_items([{"role": "user", "content": "three"}])
        assert await session.get_items() == [{"role": "user", "content": "three"}]
        # Two leaves: "two" (popped, "one" before it) and "three".
        assert len(await store.leaves("keep")) == 2
        assert {e.id for e in await store.list("keep")} > before
    finally:
        await store.close()


async def test_a_rejected_batch_stores_nothing() -> None:
    async with PrismSession("atomic", "memory:") as session:
        await session.add_items([{"role": "user", "content": "kept"}])
        store = session._store
        assert store is not None
        count = len(await store.list("atomic"))
        with pytest.raises(InvalidInputError, match="item 1"):
            await session.add_items([{"role": "user", "content": "x"}, {"bad": {1, 2}}])
        with pytest.raises(InvalidInputError, match="item 0"):
            await session.add_items(["not an item"])  # type: ignore[list-item]
        with pytest.raises(InvalidInputError, match="item 0"):
            await session.add_items([{"role": "user", "content": float("nan")}])  # type: ignore[list-item]
        # Nested past the JSON encoder's recursion, or past an entry's 128 levels.
        for levels in (100_000, 200):
            deep: Any = "x"
            for _ in range(levels):
                deep = [deep]
            with pytest.raises(InvalidInputError, match=r"item 0|nests deeper"):
                await session.add_items([{"type": "function_call_output", "output": deep}])  # type: ignore[list-item]
        assert len(await store.list("atomic")) == count
        assert await session.get_items() == [{"role": "user", "content": "kept"}]


@pytest.mark.parametrize("limit", [0, -1, True, False, 1.5, "3", [2]])
async def test_a_limit_that_is_not_none_or_a_positive_int_is_refused(limit: Any) -> None:
    async with PrismSession("limits", "memory:") as session:
        await session.add_items([{"role": "user", "content": "hi"}])
        with pytest.raises(InvalidInputError, match="limit must be None or a positive integer"):
            await session.get_items(limit)


@pytest.mark.parametrize("limit", [0, -2])
def test_a_bad_session_settings_limit_is_refused(limit: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"session_settings\.limit"):
        PrismSession("limits", "memory:", session_settings=SessionSettings(limit=limit))


async def test_session_settings_limit_is_the_default_limit() -> None:
    async with PrismSession("dflt", "memory:", session_settings={"limit": 2}) as session:
        items: list[Any] = [{"role": "user", "content": str(n)} for n in range(4)]
        await session.add_items(items)
        assert await session.get_items() == items[-2:]
        assert await session.get_items(3) == items[-3:]


def test_bad_arguments_are_typed_errors() -> None:
    with pytest.raises(InvalidSessionIdError):
        PrismSession("has space", "memory:")
    with pytest.raises(InvalidInputError, match="unknown store URL"):
        PrismSession("ok", "ftp://x")
    with pytest.raises(InvalidInputError, match="store must be"):
        PrismSession("ok", 42)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="create_observational_memory"):
        PrismSession("ok", "memory:", memory={"observation": {}})  # type: ignore[arg-type]


async def test_a_url_store_is_opened_on_first_use_and_closed_with_the_session(
    tmp_path: Any,
) -> None:
    url = f"sqlite:{tmp_path / 'agent.db'}"
    session = PrismSession("url", url)
    await session.add_items([{"role": "user", "content": "persisted"}])
    await session.close()
    with pytest.raises(StoreClosedError):
        await session.get_items()
    async with await open_store(url) as store:
        again = PrismSession("url", store)
        assert await again.get_items() == [{"role": "user", "content": "persisted"}]
