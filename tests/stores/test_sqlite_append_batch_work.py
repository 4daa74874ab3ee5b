"""The Python work an append of a batch does, counted: serialiser calls, tiktoken calls,
timestamp matches and per-entry checks (issue 16, append_many of 100). Its statements and
entry rows: test_sqlite_append_work.py.

Each count is a property of the code, not of the machine: no clock is read. Beside each
count, the faster path is shown to give exactly what the slower one gave.
"""

from __future__ import annotations

import json
import re
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.data import build_dataset, continuation
from prism_om.core.limits import MAX_ENTRY_BYTES
from prism_om.core.timestamps import utc_timestamp
from prism_om.entries import (
    ImagePart,
    Message,
    SessionEntry,
    TextPart,
    ThinkingPart,
    ToolCall,
    WireModel,
    entry_from_wire,
    entry_text,
    message_entry,
)
from prism_om.errors import EntryTooLargeError, InvalidEntryError
from prism_om.stores import _summary
from prism_om.stores import base as base_module
from prism_om.stores._rows import payload_json
from prism_om.stores._summary import latest_timestamp
from prism_om.stores.sqlite import SqliteStore
from prism_om.tokens import DEFAULT_ENCODING, get_estimator


@pytest.fixture
async def store(tmp_path: Path) -> Any:
    data = build_dataset(300)
    async with await SqliteStore.open(tmp_path / "s.db") as opened:
        await opened.append_many(data.entries)
        yield opened, data


@contextmanager
def python_calls(code: Any) -> Iterator[list[str]]:
    """Calls of the Python function with ``code`` on any thread, while inside."""
    calls: list[str] = []

    def profile(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code is code:
            calls.append(threading.current_thread().name)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield calls
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


# -- the payload: serialised in Rust, byte for byte what the model serialiser writes ---


async def test_message_payloads_are_serialised_without_a_python_call(store: Any) -> None:
    s, data = store
    more = continuation(data, 100, "x")
    with python_calls(WireModel._drop_absent.__code__) as calls:
        await s.append_many(more)
    # Every message of the batch went through the Python wrap serialiser before.
    assert calls == []


def test_message_tree_has_no_field_kept_when_none() -> None:
    # payload_json relies on exclude_none dropping exactly what _drop_absent drops.
    for model in (Message, TextPart, ImagePart, ThinkingPart, ToolCall):
        assert not model._keep_none, model
        for name, field in model.model_fields.items():
            if field.is_required():
                assert "None" not in str(field.annotation), (model, name)


_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_optional = st.none() | _text
_parts = st.lists(
    st.one_of(
        st.builds(lambda t: {"type": "text", "text": t}, _text),
        st.builds(
            lambda d, u, m: {
                "type": "image",
                **({"data": d} if d is not None else {}),
                **({"url": u} if u is not None else {}),
                **({"mimeType": m} if m is not None else {}),
            },
            _optional,
            _optional,
            _optional,
        ),
        st.builds(lambda t: {"type": "thinking", "thinking": t}, _text),
    ),
    max_size=3,
)


@st.composite
def message_wires(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "assistant", "tool"]))
    wire: dict[str, Any] = {"role": role, "content": draw(_text | _parts)}
    if role == "assistant" and draw(st.booleans()):
        wire["toolCalls"] = [
            {"id": "c1", "name": "f", "arguments": draw(st.dictionaries(_text, _json))}
        ]
    if role == "tool" or draw(st.booleans()):
        wire["toolCallId"] = draw(_text.filter(bool))
    if draw(st.booleans()):
        wire["name"] = draw(_text)
    return wire


@settings(max_examples=300, deadline=None)
@given(message_wires())
def test_payload_json_is_the_message_part_of_the_wire_json(wire: dict[str, Any]) -> None:
    entry = message_entry("s", "user", "x")
    message = Message.model_validate(wire)
    entry = entry.model_copy(update={"message": message})
    expected = Message.__pydantic_serializer__.to_json(message, by_alias=True).decode()
    assert payload_json(entry) == expected
    assert json.loads(payload_json(entry)) == json.loads(entry.to_json())["message"]


# -- tokens: tiktoken's encode_ordinary, and a plain message's content as its text -----


def test_counting_a_batch_calls_no_tiktoken_python_wrapper(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data = build_dataset(300)
    more = continuation(data, 100, "x")
    estimator = get_estimator()
    if estimator.name != DEFAULT_ENCODING:
        pytest.skip("no offline tiktoken table here")
    calls: list[str] = []
    real = tiktoken.Encoding.encode

    def counting(self: tiktoken.Encoding, text: str, **kwargs: Any) -> Any:
        calls.append(text)
        return real(self, text, **kwargs)

    monkeypatch.setattr(tiktoken.Encoding, "encode", counting)
    counts = [estimator.count_entry(e) for e in more]
    # Each entry went through encode's special-token argument checks before.
    assert calls == []
    monkeypatch.undo()
    encoding = tiktoken.get_encoding(estimator.name)
    assert counts == [len(encoding.encode(entry_text(e), disallowed_special=())) + 4 for e in more]


@settings(max_examples=200, deadline=None)
@given(message_wires(), st.sampled_from(["", "<|endoftext|>", "<|fim_prefix|>x", "a  b\n"]))
def test_token_counts_equal_the_full_encode(wire: dict[str, Any], extra: str) -> None:
    estimator = get_estimator()
    if estimator.name != DEFAULT_ENCODING:
        pytest.skip("no offline tiktoken table here")
    if isinstance(wire["content"], str):
        wire = {**wire, "content": wire["content"] + extra}
    entry = message_entry("s", "user", "x").model_copy(
        update={"message": Message.model_validate(wire)}
    )
    encoding = tiktoken.get_encoding(estimator.name)
    text = entry_text(entry)
    assert estimator.count(text) == len(encoding.encode(text, disallowed_special=()))
    assert estimator.count_entry(entry) == estimator.count(text) + 4


# -- the summary's latest timestamp: one match for a batch of one shape ----------------


class _CountingPattern:
    def __init__(self, pattern: re.Pattern[str]) -> None:
        self.pattern = pattern
        self.calls = 0

    def fullmatch(self, text: str) -> Any:
        self.calls += 1
        return self.pattern.fullmatch(text)


async def test_the_summary_matches_no_timestamp_one_by_one(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    s, data = store
    counting = _CountingPattern(_summary._UTC_SHAPE)
    monkeypatch.setattr(_summary, "_UTC_SHAPE", counting)
    more = continuation(data, 100, "x")
    await s.append_many(more)
    # Each of the 100 timestamps was matched alone before.
    assert counting.calls == 0
    (summary,) = await s.session_summaries()
    assert summary.last_activity == utc_timestamp(more[-1].timestamp)


_stamp = st.builds(
    lambda y, mo, d, h, mi, sec, frac: f"{y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{sec:02d}{frac}Z",
    st.sampled_from(["2026", "1999", "0001", "9999"]),
    st.integers(0, 13),
    st.integers(0, 32),
    st.integers(0, 24),
    st.integers(0, 60),
    st.integers(0, 60),
    st.sampled_from(["", ".000", ".999", ".5", ".123456"]),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_stamp, min_size=1, max_size=12), st.booleans())
def test_latest_timestamp_of_one_shape_is_the_max_of_every_parse(
    values: list[str], one_shape: bool
) -> None:
    if one_shape:
        # The batch's common case: every value of the first one's shape.
        values = [v[:19] + values[0][19:] for v in values]
    expected = max(filter(None, map(utc_timestamp, values)), default=None)
    assert latest_timestamp(values) == expected


# -- the batch checks: one call for a plain message -----------------------------------


def test_plain_messages_are_checked_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    for name in ("check_entry_size", "find_lone_surrogate", "check_memory_record_caps"):
        real = getattr(base_module, name)

        def counting(*args: Any, _real: Any = real, _name: str = name) -> Any:
            calls.append(_name)
            return _real(*args)

        monkeypatch.setattr(base_module, name, counting)
    more = continuation(build_dataset(300), 100, "x")
    assert base_module.check_batch_shape(more) == more
    # Three checks per entry before: 300 calls.
    assert calls == []
    # Text that is not ASCII (accents, dashes, curly quotes, an emoji) is settled too.
    other = message_entry(
        "s", "user", "caf\u00e9 \u2014 l\u2019\u00e9t\u00e9 \u201cchaud\u201d \u2600\ufe0f"
    )
    base_module.check_batch_shape([other])
    assert calls == []
    # A message the fast test cannot settle (an image part) still takes each check.
    image = message_entry("s", "user", [ImagePart(url="https://x/y.png")])
    base_module.check_batch_shape([image])
    assert sorted(calls) == ["check_entry_size", "check_memory_record_caps", "find_lone_surrogate"]


@pytest.mark.parametrize(
    ("content", "error"),
    [("a" * (MAX_ENTRY_BYTES + 1), EntryTooLargeError), ("bad \ud800 half", InvalidEntryError)],
)
async def test_plain_messages_past_the_checks_are_still_refused(
    store: Any, content: str, error: type[Exception]
) -> None:
    s, data = store
    session = data.entries[0].session_id
    before = await s.entries(session)
    good = message_entry(session, "user", "fine", parent_id=data.last_id)
    # model_copy skips validation, as a caller's copy would.
    bad = message_entry(session, "user", "x", parent_id=good.id)
    bad = bad.model_copy(update={"message": bad.message.model_copy(update={"content": content})})  # type: ignore[union-attr]
    with pytest.raises(error):
        await s.append_many([good, bad])
    assert await s.entries(session) == before


def test_a_message_read_from_the_wire_is_unchanged_by_the_fast_paths() -> None:
    wire = {
        "kind": "message",
        "id": "m1",
        "sessionId": "s",
        "parentId": None,
        "timestamp": "2026-01-01T00:00:00.000Z",
        "message": {"role": "tool", "content": "out", "toolCallId": "c1", "name": "n"},
    }
    entry: SessionEntry = entry_from_wire(wire)
    assert json.loads(payload_json(entry)) == wire["message"]
    assert get_estimator().count_entry(entry) == get_estimator().count("out") + 4
