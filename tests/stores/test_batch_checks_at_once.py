"""The store-free batch checks of every append (``check_batch_shape``) settled for a whole
batch of plain messages at once (issue 16, append_many of 100): the per-entry
check calls counted, and every outcome equal to the entry-by-entry checks'.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.data import build_dataset, continuation
from prism_om import errors as prism_errors
from prism_om.core.limits import MAX_ENTRY_BYTES
from prism_om.entries import (
    ImagePart,
    SessionEntry,
    TextPart,
    message_entry,
    plain_message_within,
    plain_messages_within,
)
from prism_om.errors import PrismMemoryError
from prism_om.stores import base as base_module
from prism_om.stores.base import check_batch_shape

TS = "2026-06-01T00:00:00.000Z"


def _per_entry_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the entries ``check_batch_shape`` checks one by one, from now on."""
    calls: list[str] = []

    def counting(entry: SessionEntry, max_bytes: int) -> bool:
        calls.append(entry.id)
        return plain_message_within(entry, max_bytes)

    monkeypatch.setattr(base_module, "plain_message_within", counting)
    return calls


def test_a_batch_of_100_plain_messages_makes_no_per_entry_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    batch = continuation(build_dataset(50), 100, "x")
    calls = _per_entry_checks(monkeypatch)
    assert check_batch_shape(batch) == batch
    # One call per entry before.
    assert calls == []
    # A batch the whole-batch test does not settle is still checked entry by entry.
    mixed = [*batch[:99], batch[99].model_copy(update={"id": batch[0].id})]
    with pytest.raises(PrismMemoryError):
        check_batch_shape(mixed)
    assert calls == [e.id for e in batch[:99]]


def _message(session: str, entry_id: str, text: str, **extra: Any) -> SessionEntry:
    return message_entry(session, "user", text, entry_id=entry_id, timestamp=TS, **extra)


# Entries (or not) that each break one check, or the plain path, or nothing.
_kinds = st.sampled_from(
    [
        "plain",
        "plain",
        "plain",
        "unicode",
        "surrogate",
        "tool_call",
        "other_session",
        "bad_session",
        "duplicate",
        "not_an_entry",
        "int_id",
        "list_id",
        "huge",
        "custom",
        "nul_id",
        "nul_content",
        "empty_id",
        "int_parent",
        "deep_data",
        "data_plain",
        "data_plain",
        "parts_plain",
        "parts_unicode",
        "data_unicode",
        "data_surrogate",
        "data_surrogate_key",
        "data_int_key",
        "data_om_marker",
        "data_no_marker",
        "data_tuple",
        "data_nan",
        "data_big_int",
        "data_deep_message",
        "data_huge",
        "data_huge_ascii",
        "data_nul",
        "parts_surrogate",
        "parts_image",
        "data_depth_10",
        "data_many_values",
    ]
)
# The kinds the whole-batch test settles (a batch of only these passes it at once).
_PLAIN_KINDS = {"plain", "data_plain", "parts_plain", "unicode", "parts_unicode", "data_unicode"}
# A host's record kept with a message, shaped as an SDK item's residue.
_ITEM_DATA = {
    "type": "host.item",
    "item": {"id": "msg_1", "type": "message", "content": [{"type": "output_text", "text": ""}]},
    "n": 3,
    "f": 1.5,
    "ok": True,
    "none": None,
}


def _with_data(entry: SessionEntry, data: Any) -> SessionEntry:
    """``entry`` holding ``data`` without validation (what model_copy allows)."""
    return entry.model_copy(update={"data": data})


def _build(kinds: list[str]) -> list[Any]:
    batch: list[Any] = []
    for n, kind in enumerate(kinds):
        entry = _message("s", f"e{n}", f"hello {n}")
        if kind == "unicode":
            entry = _message("s", f"e{n}", "héllo ✓")
        elif kind == "surrogate":
            entry = entry.model_copy(update={"id": f"e{n}\ud800"})
        elif kind == "tool_call":
            entry = message_entry(
                "s",
                "assistant",
                "",
                entry_id=f"e{n}",
                timestamp=TS,
                tool_calls=[{"id": "c", "name": "f", "arguments": {}}],
            )
        elif kind == "other_session":
            entry = _message("t", f"e{n}", "x")
        elif kind == "bad_session":
            entry = entry.model_copy(update={"session_id": "../x"})
        elif kind == "duplicate" and n:
            entry = _message("s", "e0", "again")
        elif kind == "not_an_entry":
            entry = {"id": f"e{n}"}
        elif kind == "int_id":
            entry = entry.model_copy(update={"id": n})
        elif kind == "list_id":
            entry = entry.model_copy(update={"id": [n]})
        elif kind == "huge":
            entry = entry.model_copy(
                update={"message": entry.message.model_copy(update={"content": "x" * 1_500_000})}
            )
        elif kind == "custom":
            entry = SessionEntry(
                id=f"e{n}", session_id="s", kind="custom", timestamp=TS, data={"type": "t"}
            )
        elif kind == "nul_id":
            entry = entry.model_copy(update={"id": f"e{n}\x00"})
        elif kind == "nul_content":
            entry = _message("s", f"e{n}", "a\x00b")
        elif kind == "empty_id":
            entry = entry.model_copy(update={"id": ""})
        elif kind == "int_parent":
            entry = entry.model_copy(update={"parent_id": n})
        elif kind == "deep_data":
            deep: Any = "x"
            for _ in range(5_000):
                deep = [deep]
            entry = SessionEntry.model_construct(
                id=f"e{n}",
                session_id="s",
                kind="custom",
                timestamp=TS,
                data={"type": "t", "v": deep},
            )
        elif kind == "data_plain":
            entry = _message("s", f"e{n}", f"hello {n}", data=_ITEM_DATA)
        elif kind in ("parts_plain", "parts_unicode", "parts_surrogate"):
            text = {"parts_plain": "a reply", "parts_unicode": "répondu ✓"}.get(kind, "x\udc00")
            entry = message_entry(
                "s",
                "assistant",
                [TextPart(text="one "), TextPart(text="two")],
                entry_id=f"e{n}",
                timestamp=TS,
                data=_ITEM_DATA,
            )
            parts = [TextPart(text="one "), TextPart.model_construct(text=text)]
            entry = entry.model_copy(
                update={"message": entry.message.model_copy(update={"content": parts})}
            )
        elif kind == "parts_image":
            entry = message_entry(
                "s",
                "user",
                [TextPart(text="see"), ImagePart(url="https://x/y.png")],
                entry_id=f"e{n}",
                timestamp=TS,
            )
        elif kind == "data_unicode":
            entry = _message("s", f"e{n}", "hi", data={"type": "host.item", "v": ["é"]})
        elif kind == "data_surrogate":
            entry = _with_data(entry, {"type": "host.item", "v": [{"w": "x\ud800"}]})
        elif kind == "data_surrogate_key":
            entry = _with_data(entry, {"type": "host.item", "\udfff": 1})
        elif kind == "data_int_key":
            entry = _with_data(entry, {"type": "host.item", 1: "x"})
        elif kind == "data_om_marker":
            entry = _with_data(entry, {"type": "om.observations.recorded", "observations": []})
        elif kind == "data_no_marker":
            entry = _with_data(entry, {"v": 1})
        elif kind == "data_tuple":
            entry = _with_data(entry, {"type": "host.item", "v": (1, 2)})
        elif kind == "data_nan":
            entry = _with_data(entry, {"type": "host.item", "v": float("nan")})
        elif kind == "data_big_int":
            entry = _with_data(entry, {"type": "host.item", "v": 10**40})
        elif kind == "data_deep_message":
            deep = "x"
            for _ in range(200):
                deep = [deep]
            entry = _with_data(entry, {"type": "host.item", "v": deep})
        elif kind == "data_depth_10":
            nested: Any = 1
            for _ in range(9):
                nested = {"v": nested}
            entry = _message("s", f"e{n}", "hi", data={"type": "host.item", "v": nested})
        elif kind == "data_many_values":
            many = {"type": "host.item", "v": list(range(300))}
            entry = _message("s", f"e{n}", "hi", data=many)
        elif kind == "data_huge":
            entry = _message("s", f"e{n}", "hi", data={"type": "host.item", "v": "é" * 5_000_000})
        elif kind == "data_huge_ascii":
            entry = _message("s", f"e{n}", "hi", data={"type": "host.item", "v": "x" * 9_000_000})
        elif kind == "data_nul":
            entry = _message("s", f"e{n}", "hi", data={"type": "host.item", "v": "a\x00b"})
        batch.append(entry)
    return batch


def _outcome(batch: list[Any]) -> Any:
    try:
        return ("ok", check_batch_shape(batch))
    except Exception as exc:  # the type and message are the outcome compared
        return (type(exc).__name__, str(exc))


@settings(max_examples=300, deadline=None)
@given(kinds=st.lists(_kinds, max_size=8))
def test_the_whole_batch_test_answers_as_the_checks_entry_by_entry(kinds: list[str]) -> None:
    batch = _build(kinds)
    at_once = _outcome(batch)
    real = base_module.plain_messages_within
    base_module.plain_messages_within = lambda batch, max_bytes: False
    try:
        one_by_one = _outcome(batch)
        # And with no fast path at all: every check run on every entry.
        real_one = base_module.plain_message_within
        base_module.plain_message_within = lambda entry, max_bytes: False
        try:
            every_check = _outcome(batch)
        finally:
            base_module.plain_message_within = real_one
    finally:
        base_module.plain_messages_within = real
    assert at_once == one_by_one == every_check
    if kinds and set(kinds) <= _PLAIN_KINDS:
        assert plain_messages_within(batch, MAX_ENTRY_BYTES)


@settings(max_examples=300, deadline=None)
@given(kinds=st.lists(_kinds, max_size=8))
def test_a_batch_is_accepted_or_refused_with_a_typed_error(kinds: list[str]) -> None:
    outcome = _outcome(_build(kinds))
    assert outcome[0] == "ok" or hasattr(prism_errors, outcome[0]), outcome
    refused = {"nul_id", "empty_id", "int_parent", "int_id", "list_id", "deep_data"}
    refused |= {"data_surrogate", "data_surrogate_key", "parts_surrogate", "data_deep_message"}
    refused |= {"data_huge", "data_huge_ascii"}
    if refused & set(kinds):
        assert outcome[0] != "ok"


def test_the_size_bound_of_the_batch_holds_each_entrys() -> None:
    # Each entry alone is within the cap, the sum of the batch is not: entry by entry.
    big = "x" * ((MAX_ENTRY_BYTES - 1024) // 6 // 2)
    batch = [_message("s", "a", big), _message("s", "b", big, parent_id="a")]
    assert all(plain_message_within(e, MAX_ENTRY_BYTES) for e in batch)
    assert plain_messages_within(batch[:1], MAX_ENTRY_BYTES)
    assert not plain_messages_within([*batch, _message("s", "c", big)], MAX_ENTRY_BYTES)
    assert check_batch_shape(batch) == batch


def test_a_batch_of_sdk_items_makes_no_per_entry_check(monkeypatch: pytest.MonkeyPatch) -> None:
    # PrismSession's entries: messages carrying the item in data, an assistant's text in
    # parts. Before, each took every per-entry check (~50 us an item of add_items).
    from prism_om.integrations.openai_agents.items import entry_for_item

    items: list[dict[str, Any]] = []
    for n in range(50):
        items.append({"role": "user", "content": f"On 2026-03-0{n % 9 + 1} Dana paid ${n}.50"})
        items.append(
            {
                "id": f"msg_{n}",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": f"Noted: {n}", "annotations": []}],
            }
        )
    batch = [entry_for_item("s", item, index=n) for n, item in enumerate(items)]
    assert all(entry.data is not None for entry in batch)
    calls = _per_entry_checks(monkeypatch)
    assert check_batch_shape(batch) == batch
    assert calls == []
