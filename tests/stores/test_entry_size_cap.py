"""The entry size check: its cheap bound never lets an oversized entry through (item 15)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.entries import check_entry_size, entry_wire_bytes, message_entry
from prism_om.errors import EntryTooLargeError

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


JSON_LEAF = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | TEXT
DATA = st.recursive(
    JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(
    content=TEXT,
    cap=st.integers(min_value=100, max_value=2500),
    data=st.none() | st.dictionaries(TEXT, DATA, max_size=3),
    summary=st.none() | TEXT,
)
def test_refused_exactly_when_the_wire_json_is_over_the_cap(
    content: str, cap: int, data: dict[str, object] | None, summary: str | None
) -> None:
    # A message's data (a host's record kept with it) and summary count as its text does.
    entry = message_entry(
        "s1",
        "user",
        content,
        entry_id="e1",
        timestamp="2024-05-01T10:00:00Z",
        data=None if data is None else {**data, "type": "host.item"},
    )
    if summary is not None:
        entry = entry.model_copy(update={"summary": summary})
    size = entry_wire_bytes(entry)
    if size > cap:
        with pytest.raises(EntryTooLargeError, match=f"'e1' of session 's1' is {size:,} bytes"):
            check_entry_size(entry, cap)
    else:
        check_entry_size(entry, cap)


def test_tool_calls_count_too() -> None:
    entry = message_entry(
        "s1",
        "assistant",
        "",
        entry_id="e2",
        tool_calls=[{"id": "c1", "name": "write", "arguments": {"text": "z" * 5000}}],
    )
    assert entry_wire_bytes(entry) > 5000
    with pytest.raises(EntryTooLargeError, match="'e2'"):
        check_entry_size(entry, 5000)


def test_a_message_with_data_beyond_the_cap_is_refused_by_every_append_check() -> None:
    # Before: the cheap bound of a message left its data out, and 10 MB of data was kept.
    from prism_om.core.limits import MAX_ENTRY_BYTES
    from prism_om.stores.base import check_batch_shape

    for blob in ("\u00e9" * 5_000_000, "x" * 9_000_000):
        entry = message_entry("s1", "user", "hi", entry_id="e3", data={"type": "h", "v": blob})
        assert entry_wire_bytes(entry) > MAX_ENTRY_BYTES
        with pytest.raises(EntryTooLargeError, match="'e3'"):
            check_batch_shape([entry])
