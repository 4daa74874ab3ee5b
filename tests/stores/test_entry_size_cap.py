"""The entry size check: its cheap bound never lets an oversized entry through (item 15)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from prism_om.entries import check_entry_size, entry_wire_bytes, message_entry
from prism_om.errors import EntryTooLargeError

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=300)


@settings(max_examples=300, deadline=None)
@given(content=TEXT, cap=st.integers(min_value=100, max_value=2500))
def test_refused_exactly_when_the_wire_json_is_over_the_cap(content: str, cap: int) -> None:
    entry = message_entry("s1", "user", content, entry_id="e1", timestamp="2024-05-01T10:00:00Z")
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
